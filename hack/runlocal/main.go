// Command runlocal starts a throwaway management-cluster API server (the
// kube-apiserver and etcd that hack/tools.sh builds) with this provider's CRDs
// installed, and runs the manager against it until interrupted. It is what
// `make run` does, so the provider can be tried on a machine with no cluster.
//
//	go run ./hack/runlocal [manager flags...]
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/manager"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "runlocal: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	// The API server calls the manager's webhooks with a certificate envtest makes.
	env, err := testenv.NewEnvironment(testenv.Options{WithWebhooks: true})
	if err != nil {
		return err
	}
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("starting the local API server: %w", err)
	}
	defer func() { _ = env.Stop() }()

	dir, err := os.MkdirTemp("", "cabpk-formats-runlocal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path, err := testenv.WriteAdminKubeconfig(env, dir)
	if err != nil {
		return err
	}
	fmt.Printf("local API server running; try: KUBECONFIG=%s kubectl get kubeadmconfigs -A\n", path)
	fmt.Println("manager health: http://127.0.0.1:9440/healthz  readiness: http://127.0.0.1:9440/readyz  (Ctrl-C stops)")

	hooks := env.WebhookInstallOptions
	args := append([]string{
		"--kubeconfig=" + path,
		fmt.Sprintf("--webhook-port=%d", hooks.LocalServingPort),
		"--webhook-cert-dir=" + hooks.LocalServingCertDir,
		"--health-addr=127.0.0.1:9440",
		"--diagnostics-address=127.0.0.1:8443",
		"--insecure-diagnostics",
	}, os.Args[1:]...)
	return manager.Run(ctrl.SetupSignalHandler(), args)
}
