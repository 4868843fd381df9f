// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest, with binaries from internal/testbin) with this provider's CRDs
// installed, for tests that must prove behaviour against an API server.
package testenv

import (
	"path/filepath"
	"runtime"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// RepoRoot is the root of this repository, found from this file's location so
// tests work from any package directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// CRDDir holds the generated CRDs.
func CRDDir() string {
	return filepath.Join(RepoRoot(), "bootstrap", "kubeadm", "config", "crd", "bases")
}

// WebhookManifests is the generated webhook configuration.
func WebhookManifests() string {
	return filepath.Join(RepoRoot(), "bootstrap", "kubeadm", "config", "webhook", "manifests.yaml")
}

// Env is a running API server with the CRDs installed.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme
	// Environment is the underlying envtest environment (webhook install options, kubeconfig helpers).
	Environment *envtest.Environment
}

// Options tune Start.
type Options struct {
	// WithWebhooks registers the generated webhook configurations with the API
	// server, pointing at a local TLS port and certificate that envtest
	// allocates (Environment.WebhookInstallOptions); a webhook server must
	// then serve there (see ServeWebhooks, or the manager's flags).
	WithWebhooks bool
}

// Start launches the API server and stops it when the test ends.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	assets, err := testbin.EnvtestAssets()
	if err != nil {
		t.Fatalf("%v", err)
	}
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := bootstrapv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{CRDDir()},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	if opts.WithWebhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{WebhookManifests()}}
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, Environment: env}
}
