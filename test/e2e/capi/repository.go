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

package capi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
)

// installed is a provider as the stack's management cluster runs it: what
// `clusterctl init` would have recorded in its inventory.
type installed struct {
	name      string
	kind      clusterctlv1.ProviderType
	version   string
	namespace string
	// crds is the directory of the CRDs the stack installed for it.
	crds func() (string, error)
	// metadata is its metadata.yaml, when the suite copies it from
	// where it lives (the Cluster API module); nil when the e2e config
	// names the file itself.
	metadata func() (string, error)
}

func (p installed) label() string { return clusterctlv1.ManifestLabel(p.name, p.kind) }

func simulatedCRDs() (string, error) {
	return filepath.Join(testenv.RepoRoot(), "test", "infrastructure", "simulated", "config", "crd", "bases"), nil
}

func clusterAPIMetadata() (string, error) {
	dir, err := testenv.ClusterAPIModuleDir()
	return filepath.Join(dir, "metadata.yaml"), err
}

// providers are the stack's management cluster's providers, with the
// versions config/simulated.yaml gives them.
var providers = []installed{
	{name: "cluster-api", kind: clusterctlv1.CoreProviderType, version: "v1.14.2", namespace: "capi-system",
		crds: testenv.ClusterAPICRDDir, metadata: clusterAPIMetadata},
	{name: "kubeadm", kind: clusterctlv1.BootstrapProviderType, version: "v0.1.0", namespace: stack.ProviderNamespace,
		crds: func() (string, error) { return testenv.CRDDir(), nil }},
	{name: "kubeadm", kind: clusterctlv1.ControlPlaneProviderType, version: "v1.14.2", namespace: "capi-kubeadm-control-plane-system",
		crds: testenv.KubeadmControlPlaneCRDDir, metadata: clusterAPIMetadata},
	{name: "simulated", kind: clusterctlv1.InfrastructureProviderType, version: "v0.1.0", namespace: "simulated-system",
		crds: simulatedCRDs},
}

// writeRepositorySources writes, under dir, each provider's components (its
// CRDs, as the stack installed them) and the metadata.yaml the e2e config
// takes from the Cluster API module: the inputs of the framework's
// CreateRepository.
func writeRepositorySources(dir string) error {
	for _, p := range providers {
		out := filepath.Join(dir, p.label())
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		components, err := concatenatedCRDs(p.crds)
		if err != nil {
			return fmt.Errorf("%s: %w", p.label(), err)
		}
		if err := os.WriteFile(filepath.Join(out, "components.yaml"), components, 0o644); err != nil {
			return err
		}
		if p.metadata == nil {
			continue
		}
		src, err := p.metadata()
		if err != nil {
			return err
		}
		metadata, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "metadata.yaml"), metadata, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func concatenatedCRDs(dirFunc func() (string, error)) ([]byte, error) {
	dir, err := dirFunc()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out bytes.Buffer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(bytes.TrimPrefix(b, []byte("---\n")))
	}
	return out.Bytes(), nil
}

// createInventory records the providers in clusterctl's inventory of the
// management cluster, through clusterctl's own client and as its installer
// labels them (repository.components.InventoryObject): clusterctl finds the
// infrastructure provider of a template, and the version `move` compares,
// there.
func createInventory(ctx context.Context, c client.Client, kubeconfig, clusterctlConfig string) error {
	cfg, err := clusterctlconfig.New(ctx, clusterctlConfig)
	if err != nil {
		return err
	}
	inventory := clusterctlcluster.New(clusterctlcluster.Kubeconfig{Path: kubeconfig}, cfg).ProviderInventory()
	if err := inventory.EnsureCustomResourceDefinitions(ctx); err != nil {
		return err
	}
	for _, p := range providers {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		if err := inventory.Create(ctx, clusterctlv1.Provider{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.label(), Labels: map[string]string{
				clusterctlv1.ClusterctlLabel:     "",
				clusterv1.ProviderNameLabel:      p.label(),
				clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue,
			}},
			ProviderName: p.name,
			Type:         string(p.kind),
			Version:      p.version,
		}); err != nil {
			return fmt.Errorf("recording %s in clusterctl's inventory: %w", p.label(), err)
		}
	}
	return nil
}
