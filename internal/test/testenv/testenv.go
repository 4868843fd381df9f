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

// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest, with binaries from internal/testbin) with this provider's CRDs
// installed, for tests that must prove behaviour against an API server.
package testenv

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/moduledir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/webhooks/conversion"
)

// RepoRoot is the root of this repository, from any package directory.
func RepoRoot() string { return repodir.Root() }

// CRDDir holds the generated CRDs.
func CRDDir() string {
	return filepath.Join(RepoRoot(), "bootstrap", "kubeadm", "config", "crd", "bases")
}

// WebhookManifests is the generated webhook configuration.
func WebhookManifests() string {
	return filepath.Join(RepoRoot(), "bootstrap", "kubeadm", "config", "webhook", "manifests.yaml")
}

// ClusterAPICRDDir holds Cluster API's core CRDs (Cluster, Machine,
// MachinePool, ...) in the module cache, at the version go.mod pins.
func ClusterAPICRDDir() (string, error) {
	dir, err := ClusterAPIModuleDir()
	return filepath.Join(dir, "core", "config", "crd", "bases"), err
}

// ClusterAPIModuleDir is Cluster API's module directory in the module cache.
func ClusterAPIModuleDir() (string, error) {
	clusterAPIDir.once.Do(func() {
		clusterAPIDir.dir, clusterAPIDir.err = moduledir.Dir("sigs.k8s.io/cluster-api", "")
	})
	return clusterAPIDir.dir, clusterAPIDir.err
}

// KubeadmControlPlaneCRDDir holds Cluster API's KubeadmControlPlane CRDs.
func KubeadmControlPlaneCRDDir() (string, error) {
	dir, err := ClusterAPIModuleDir()
	return filepath.Join(dir, "controlplane", "kubeadm", "config", "crd", "bases"), err
}

var clusterAPIDir struct {
	once sync.Once
	dir  string
	err  error
}

// Options say what an Environment installs.
type Options struct {
	// WithWebhooks registers the generated webhook configurations with the API
	// server, pointing at a local TLS port and certificate that envtest
	// allocates (Environment.Webhooks); a webhook server must then serve
	// there (see ServeWebhooks, or the manager's flags).
	WithWebhooks bool
	// WebhookPort, when set, is the webhook server's port instead of a free
	// one; WebhookDNSName, when set, is a name its certificate carries
	// besides localhost and 127.0.0.1: a Service's, for clients that reach
	// the server by it (Cluster API calling a Runtime extension).
	WebhookPort    int
	WebhookDNSName string
	// WithClusterAPI also installs Cluster API's core and
	// KubeadmControlPlane CRDs, which the KubeadmConfig controller watches.
	WithClusterAPI bool
	// CRDDirs are further CRD directories to install (an infrastructure
	// provider's, say).
	CRDDirs []string
	// APIServerDir keeps the API server's certificates and port across a
	// restart (RestartAPIServer): clients keep their kubeconfigs, as they do
	// when a real cluster's API server restarts.
	APIServerDir string
}

// Environment is a real kube-apiserver and etcd with this provider's CRDs.
// Config, Client and Scheme are set once it has started.
type Environment struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme

	env            *envtest.Environment
	clusterAPICRDs string
	webhookDNSName string
}

// NewEnvironment describes an API server with this provider's CRDs and, with
// webhooks, its webhook configurations and the CRDs' conversion webhook.
// Start starts it; tests use Start (the function) or Run instead.
func NewEnvironment(opts Options) (*Environment, error) {
	assets, err := testbin.EnvtestAssets()
	if err != nil {
		return nil, err
	}
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, bootstrapv1.AddToScheme, conversion.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	e := &Environment{Scheme: scheme, env: &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{CRDDir()}, opts.CRDDirs...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}}
	// Owner references that block deletion need update rights on the owner's
	// finalizers (OpenShift-based management clusters enforce this).
	e.env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	if opts.APIServerDir != "" {
		if err := os.MkdirAll(opts.APIServerDir, 0o700); err != nil {
			return nil, err
		}
		e.env.ControlPlane.GetAPIServer().CertDir = opts.APIServerDir
	}
	if opts.WithClusterAPI {
		if e.clusterAPICRDs, err = ClusterAPICRDDir(); err != nil {
			return nil, err
		}
		if err := clusterv1.AddToScheme(scheme); err != nil {
			return nil, err
		}
		if err := controlplanev1.AddToScheme(scheme); err != nil {
			return nil, err
		}
	}
	if opts.WithWebhooks {
		e.env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths: []string{WebhookManifests()},
			// Point this provider's CRDs at the conversion webhook although
			// their kinds do not implement controller-runtime's Convertible
			// (the converters are registered functions, as upstream's are).
			// Only our CRDs are installed with these options; Cluster API's
			// come after, unchanged.
			IgnoreSchemeConvertible: true,
			LocalServingPort:        opts.WebhookPort,
		}
		if opts.WebhookPort != 0 {
			// envtest picks the host only with the port.
			e.env.WebhookInstallOptions.LocalServingHost = "127.0.0.1"
		}
		e.webhookDNSName = opts.WebhookDNSName
	}
	return e, nil
}

// Start starts the API server and etcd, installs the CRDs and makes a client.
func (e *Environment) Start() error {
	cfg, err := e.env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	if err := e.installCRDs(cfg); err != nil {
		_ = e.env.Stop()
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		_ = e.env.Stop()
		return err
	}
	e.Config, e.Client = cfg, c
	if e.webhookDNSName != "" {
		if err := e.addWebhookDNSName(context.Background(), e.webhookDNSName); err != nil {
			_ = e.env.Stop()
			return err
		}
	}
	return nil
}

// installCRDs labels this provider's CRDs and adds Cluster API's.
func (e *Environment) installCRDs(cfg *rest.Config) error {
	if err := labelContract(cfg, e.env.CRDs); err != nil {
		return err
	}
	if e.clusterAPICRDs == "" {
		return nil
	}
	kcp, err := KubeadmControlPlaneCRDDir()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{e.clusterAPICRDs, kcp}, ErrorIfPathMissing: true, Scheme: e.Scheme}); err != nil {
		return fmt.Errorf("installing Cluster API's CRDs: %w", err)
	}
	// KubeadmControlPlane is a provider's kind: Cluster API reads it at
	// the API version its contract label names.
	return LabelCRDs(cfg, []string{"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io"},
		map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"})
}

// labelContract gives this provider's CRDs the contract labels the kustomize
// tree adds (Cluster API looks them up to pick the API version it reads).
func labelContract(cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "bootstrap", "kubeadm", "config", "crd", "kustomization.yaml"))
	if err != nil {
		return err
	}
	var k struct {
		Labels []struct {
			Pairs map[string]string `json:"pairs"`
		} `json:"labels"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return fmt.Errorf("reading the CRDs' kustomization: %w", err)
	}
	labels := map[string]string{}
	for _, l := range k.Labels {
		maps.Copy(labels, l.Pairs)
	}
	var ours []string
	for _, crd := range crds {
		if crd.Spec.Group == bootstrapv1.GroupVersion.Group {
			ours = append(ours, crd.Name)
		}
	}
	return LabelCRDs(cfg, ours, labels)
}

// LabelCRDs adds labels to the named CRDs (the contract labels that a
// provider's kustomize tree adds and its bases lack).
func LabelCRDs(cfg *rest.Config, names []string, labels map[string]string) error {
	s := k8sruntime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	for _, name := range names {
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, live); err != nil {
			return err
		}
		patch := client.MergeFrom(live.DeepCopy())
		if live.Labels == nil {
			live.Labels = map[string]string{}
		}
		maps.Copy(live.Labels, labels)
		if err := c.Patch(context.Background(), live, patch); err != nil {
			return fmt.Errorf("labelling CRD %s: %w", name, err)
		}
	}
	return nil
}

// AdminKubeconfig is a kubeconfig for a cluster-admin user.
func (e *Environment) AdminKubeconfig() ([]byte, error) {
	user, err := e.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}

// WriteAdminKubeconfig writes AdminKubeconfig to dir and returns its path, for
// processes outside the test.
func (e *Environment) WriteAdminKubeconfig(dir string) (string, error) {
	data, err := e.AdminKubeconfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// New starts an Environment; the caller stops it with Stop.
func New(opts Options) (*Environment, error) {
	e, err := NewEnvironment(opts)
	if err != nil {
		return nil, err
	}
	if err := e.Start(); err != nil {
		return nil, err
	}
	return e, nil
}

// Start starts an Environment for one test and stops it when the test ends.
func Start(t testing.TB, opts Options) *Environment {
	t.Helper()
	e, err := New(opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Logf("stopping envtest: %v", err)
		}
	})
	return e
}

// Stop stops the API server and etcd.
func (e *Environment) Stop() error { return e.env.Stop() }

// RestartAPIServer stops the API server (SIGTERM) and starts it again on the
// same port, certificates and etcd, after down has passed. Only an
// Environment with Options.APIServerDir keeps its certificates, and so its
// clients.
func (e *Environment) RestartAPIServer(down time.Duration) error {
	s := e.env.ControlPlane.GetAPIServer()
	if err := s.Stop(); err != nil {
		return fmt.Errorf("stopping the API server: %w", err)
	}
	time.Sleep(down)
	if err := s.Start(); err != nil {
		return fmt.Errorf("starting the API server again: %w", err)
	}
	return nil
}
