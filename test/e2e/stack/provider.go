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

package stack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// ProviderNamespace is the bootstrap provider's namespace in a release, where
// its leader-election lease lives (this provider's and upstream's alike).
const ProviderNamespace = "capi-kubeadm-bootstrap-system"

// Provider is a kubeadm bootstrap provider as a management cluster runs it:
// its CRDs and webhook configurations (what clusterctl installs) and its
// manager (the Deployment's binary, identity and flags). The stack runs this
// provider's at start; a test can put upstream's v1.14.2 in its place, the
// way README's swap does, or roll it out over the running one.
type Provider struct {
	// Name names the provider's manager in logs (<Name>.log in the state
	// directory).
	Name string
	// Args are the manager's flags besides the stack's own (kubeconfig,
	// ports, certificates).
	Args []string

	binary     string
	crds       string // directory of CRD manifests
	webhooks   string // webhook configuration manifests
	kubeconfig []byte
	// leaderElection is how the manager elects a leader on the lease in
	// ProviderNamespace, as its Deployment runs it.
	leaderElection bool
	electionArgs   []string
	electionWrap   []string
}

// With returns the provider with more manager flags.
func (p Provider) With(args ...string) Provider {
	p.Args = append(append([]string(nil), p.Args...), args...)
	return p
}

// WithLeaderElection returns the provider with its manager electing a leader,
// as its Deployment runs it (short lease, so that a takeover happens within
// seconds).
func (p Provider) WithLeaderElection() Provider {
	p.leaderElection = true
	return p
}

// leaseFlags are both managers' lease timings in the stack.
var leaseFlags = []string{"--leader-elect", "--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s"}

// OurProvider is this provider: its generated CRDs and webhooks, its manager
// with exactly the rights its generated ClusterRole grants.
func (m *Management) OurProvider() (Provider, error) {
	kubeconfig, err := m.env.ManagerKubeconfig()
	if err != nil {
		return Provider{}, err
	}
	return Provider{
		Name: "manager", binary: m.managerBin, crds: testenv.CRDDir(), webhooks: testenv.WebhookManifests(),
		kubeconfig: kubeconfig, electionArgs: append([]string{"--leader-elect-namespace=" + ProviderNamespace}, leaseFlags...),
	}, nil
}

// UpstreamProvider is Cluster API's kubeadm bootstrap provider v1.14.2: the
// manager built from the module (once per stack), its CRDs and webhooks from
// the module's manifests. Its manager runs with the admin kubeconfig (its own
// ClusterRole is not this repository's) and finds its lease's namespace as
// in a Pod.
func (m *Management) UpstreamProvider() (Provider, error) {
	bin := filepath.Join(m.binDir, "upstream-manager")
	if _, err := os.Stat(bin); err != nil {
		m.progress("building upstream's manager (sigs.k8s.io/cluster-api/bootstrap/kubeadm v1.14.2)")
		if err := process.Build(bin, "sigs.k8s.io/cluster-api/bootstrap/kubeadm"); err != nil {
			return Provider{}, err
		}
	}
	dir, err := testenv.ClusterAPIModuleDir()
	if err != nil {
		return Provider{}, err
	}
	kubeconfig, err := m.env.AdminKubeconfig()
	if err != nil {
		return Provider{}, err
	}
	return Provider{
		Name: "upstream-manager", binary: bin,
		crds:       filepath.Join(dir, "bootstrap", "kubeadm", "config", "crd", "bases"),
		webhooks:   filepath.Join(dir, "bootstrap", "kubeadm", "config", "webhook", "manifests.yaml"),
		kubeconfig: kubeconfig,
		// Its Deployment's flags, less the CRD migration (this provider's
		// CRDs are a superset; migrating is not what a swap tests).
		Args:         []string{"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields"},
		electionArgs: leaseFlags, electionWrap: process.PodNamespaceWrap(ProviderNamespace),
	}, nil
}

// ReplaceProvider swaps providers the way README says: the running manager
// goes (clusterctl delete), p's CRDs and webhook configurations replace the
// installed ones and p's manager starts (clusterctl init).
func (m *Management) ReplaceProvider(p Provider) error {
	m.stopManager()
	if err := m.installComponents(p, m.webhookPort); err != nil {
		return err
	}
	m.provider = p // installed, even if its manager then fails to start
	return m.startManager(p, m.webhookPort)
}

// RollOutProvider applies p's components over the running provider's
// Deployment: p's manager starts beside the running one (both elect a leader
// on the one lease, so the running one must elect too), the Service's
// webhook traffic goes to the new Pod, the old Pod terminates and the new
// manager takes the lease.
func (m *Management) RollOutProvider(p Provider) error {
	if !m.provider.leaderElection || !p.leaderElection {
		return errors.New("a rollout runs two managers at once: both must elect a leader")
	}
	old := m.manager
	port, err := process.FreeTCPPort()
	if err != nil {
		return err
	}
	next, err := m.runManager(p, port)
	if err != nil {
		return err
	}
	if err := testenv.WaitForTLS(net.JoinHostPort(m.env.Webhooks().Host, strconv.Itoa(port)), time.Minute); err != nil {
		next.Kill()
		return fmt.Errorf("%s's webhooks: %w", p.Name, err)
	}
	if leads, _ := next.Leads(); leads {
		next.Kill()
		return fmt.Errorf("%s leads while %s holds the lease", p.Name, old.Name)
	}
	if err := m.installComponents(p, port); err != nil {
		return err
	}
	m.manager, m.provider, m.webhookPort = next, p, port
	if err := m.waitForAdmission(); err != nil {
		return err
	}
	old.Stop()
	deadline := time.Now().Add(time.Minute)
	for {
		if leads, _ := next.Leads(); leads {
			return nil
		}
		if next.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("%s did not take the lease over\n%s", p.Name, next.LogTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// installComponents makes the management cluster's KubeadmConfig CRDs and
// bootstrap webhook configurations p's, served by the webhook server on port
// (conversion included), keeping what clusterctl and Cluster API add: the
// contract labels.
func (m *Management) installComponents(p Provider, port int) error {
	if m.provider.Name == p.Name && m.webhookPort == port {
		return nil // the same components, served on the same port
	}
	ctx := context.Background()
	ca := m.env.Webhooks().CAData
	serving := webhookServer{host: m.env.Webhooks().Host, port: port, ca: ca}
	conversion := serving.url("/convert")
	files, err := filepath.Glob(filepath.Join(p.crds, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("%s's CRDs in %s: %v", p.Name, p.crds, err)
	}
	for _, f := range files {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := readManifest(f, crd); err != nil {
			return err
		}
		existing := &apiextensionsv1.CustomResourceDefinition{}
		if err := m.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, existing); err != nil {
			return err
		}
		crd.ResourceVersion = existing.ResourceVersion
		crd.Labels = existing.Labels
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &conversion, CABundle: ca},
				ConversionReviewVersions: []string{"v1", "v1beta1"},
			},
		}
		if err := m.Client.Update(ctx, crd); err != nil {
			return fmt.Errorf("installing %s's CRD %s: %w", p.Name, crd.Name, err)
		}
	}
	// The webhook configurations clusterctl would install.
	if err := installWebhookConfigurations(ctx, m.Client, p.webhooks, serving, "", nil); err != nil {
		return fmt.Errorf("installing %s's webhooks: %w", p.Name, err)
	}
	return nil
}

// webhookServer is where a webhook server listens, with the CA of its
// serving certificate.
type webhookServer struct {
	host string
	port int
	ca   []byte
}

func (w webhookServer) url(path string) string {
	return (&url.URL{Scheme: "https", Host: net.JoinHostPort(w.host, strconv.Itoa(w.port)), Path: path}).String()
}

// installWebhookConfigurations creates (or replaces) the webhook
// configurations of a manifest file, each webhook called at its service path
// on serving; prefix goes before each configuration's name, and keep, when
// set, says which webhooks to install.
func installWebhookConfigurations(ctx context.Context, c client.Client, file string, serving webhookServer, prefix string, keep func(hook map[string]any) bool) error {
	docs, err := readManifests(file)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		cfg := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &cfg.Object); err != nil {
			return err
		}
		if cfg.GetKind() != "MutatingWebhookConfiguration" && cfg.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		webhooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		var kept []any
		for _, w := range webhooks {
			hook := w.(map[string]any)
			if keep != nil && !keep(hook) {
				continue
			}
			path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			hook["clientConfig"] = map[string]any{"url": serving.url(path), "caBundle": base64.StdEncoding.EncodeToString(serving.ca)}
			kept = append(kept, hook)
		}
		if err := unstructured.SetNestedSlice(cfg.Object, kept, "webhooks"); err != nil {
			return err
		}
		cfg.SetName(prefix + cfg.GetName())
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(cfg.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(cfg), existing)
		switch {
		case apierrors.IsNotFound(err):
			err = c.Create(ctx, cfg)
		case err == nil:
			cfg.SetResourceVersion(existing.GetResourceVersion())
			err = c.Update(ctx, cfg)
		}
		if err != nil {
			return fmt.Errorf("installing %s %s: %w", cfg.GetKind(), cfg.GetName(), err)
		}
	}
	return nil
}

// waitForAdmission waits until a KubeadmConfig dry-run create passes the
// installed webhooks.
func (m *Management) waitForAdmission() error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		probe := &bootstrapv1.KubeadmConfig{}
		probe.Namespace, probe.Name = "default", "webhook-probe"
		err := m.Client.Create(context.Background(), probe, client.DryRunAll)
		if err == nil {
			return nil
		}
		if m.manager.Exited() {
			return fmt.Errorf("%s exited\n%s", m.manager.Name, m.manager.LogTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s's webhooks did not answer within 60s: %w", m.manager.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func readManifest(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, into)
}

// readManifests splits a multi-document YAML file.
func readManifests(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}
