/*
Copyright The cabpk-formats Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command runlocal starts a throwaway management-cluster API server (the
// kube-apiserver and etcd that hack/tools.sh builds) with Cluster API's core
// CRDs and this provider's CRDs and webhooks installed, and runs the manager
// binary against it until interrupted. It is what `make run` does, so the
// provider can be tried on a machine with no cluster.
//
//	go -C hack run ./runlocal <manager binary> [manager flags...]
//
// Ctrl-C, SIGTERM to this process, or the end of the process that started it
// (make, killed) stops the manager, then the API server and etcd: nothing is
// left running.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: runlocal <manager binary> [manager flags...]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "runlocal: %v\n", err)
		os.Exit(1)
	}
}

func run(manager string, extra []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// make does not pass a SIGTERM it receives on to its recipe: have the
	// kernel send one when the parent goes away.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return fmt.Errorf("asking to be told when the parent exits: %w", err)
	}
	if os.Getppid() == 1 {
		return errors.New("the process that started runlocal is gone")
	}

	// The API server calls the manager's webhooks with a certificate envtest makes.
	env, err := testenv.NewEnvironment(testenv.Options{WithWebhooks: true, WithClusterAPI: true})
	if err != nil {
		return err
	}
	if err := env.Start(); err != nil {
		return fmt.Errorf("starting the local API server: %w", err)
	}
	defer func() { _ = env.Stop() }()

	dir, err := os.MkdirTemp("", "cabpk-formats-runlocal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path, err := env.WriteAdminKubeconfig(dir)
	if err != nil {
		return err
	}
	fmt.Printf("local API server running; try: KUBECONFIG=%s kubectl get kubeadmconfigs -A\n", path)
	fmt.Println("manager health: http://127.0.0.1:9440/healthz  readiness: http://127.0.0.1:9440/readyz  (Ctrl-C stops)")

	hooks := env.Webhooks()
	args := append([]string{
		"--kubeconfig=" + path,
		fmt.Sprintf("--webhook-port=%d", hooks.Port),
		"--webhook-cert-dir=" + hooks.CertDir,
		"--health-addr=127.0.0.1:9440",
		"--diagnostics-address=127.0.0.1:8443",
		"--insecure-diagnostics",
	}, extra...)
	cmd := exec.Command(manager, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Its own process group: a terminal's Ctrl-C reaches the manager through
	// this process only, so the order of shutdown stays ours.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the manager: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return fmt.Errorf("the manager exited: %w", err)
	case <-ctx.Done():
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return err
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done //nolint:errcheck // killed: its exit status says only that
	}
	return nil
}
