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
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
)

// installed is a provider as the stack's management cluster runs it: what
// `clusterctl init` would have recorded in its inventory.
type installed struct {
	name      string
	kind      clusterctlv1.ProviderType
	version   string
	namespace string
}

func (p installed) label() string { return clusterctlv1.ManifestLabel(p.name, p.kind) }

// providers are the stack's management cluster's providers, with the
// versions config/simulated.yaml gives them.
var providers = []installed{
	{name: "cluster-api", kind: clusterctlv1.CoreProviderType, version: testbin.Versions["CLUSTER_API_VERSION"], namespace: "capi-system"},
	{name: "kubeadm", kind: clusterctlv1.BootstrapProviderType, version: releases.OurVersion, namespace: stack.ProviderNamespace},
	{name: "kubeadm", kind: clusterctlv1.ControlPlaneProviderType, version: testbin.Versions["CLUSTER_API_VERSION"], namespace: "capi-kubeadm-control-plane-system"},
	{name: "simulated", kind: clusterctlv1.InfrastructureProviderType, version: releases.SimulatedVersion, namespace: "simulated-system"},
}

// writeRepositorySources writes, under dir/<label>, each provider's
// components as its release has them (components.yaml) and its
// metadata.yaml: the inputs config/simulated.yaml gives the framework's
// CreateRepository.
func writeRepositorySources(dir string, r *releases.Releases) error {
	for _, p := range providers {
		// The config names the templates itself, from data/.
		files, err := filepath.Glob(filepath.Join(r.Repository, p.label(), p.version, "*-components.yaml"))
		if err != nil || len(files) != 1 {
			return fmt.Errorf("%s %s: want one components file, found %v (%v)", p.label(), p.version, files, err)
		}
		if err := copyComponents(files[0], filepath.Join(dir, p.label())); err != nil {
			return err
		}
	}
	return nil
}

// copyComponents copies a provider's components file into dst as
// components.yaml, with the metadata.yaml beside it, as the framework's
// CreateRepository and clusterctl's local repositories name them.
func copyComponents(components, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for target, f := range map[string]string{"components.yaml": components, "metadata.yaml": filepath.Join(filepath.Dir(components), "metadata.yaml")} {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, target), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// amendClusterctlConfig adds to the clusterctl configuration what the
// framework's CreateRepository cannot write (its variables are strings):
// the simulated cloud's URL the simulated provider's Deployment needs, and
// cert-manager's manifest when the releases have it.
func amendClusterctlConfig(path string, r *releases.Releases, cloudURL string) error {
	return editClusterctlConfig(path, path, func(cfg map[string]any) error {
		cfg["SIMULATED_CLOUD_URL"] = cloudURL
		if cm, ok := r.CertManager(); ok {
			cfg["cert-manager"] = cm
		}
		return nil
	})
}

// editClusterctlConfig reads the clusterctl configuration at src, lets edit
// change it and writes it to dst.
func editClusterctlConfig(src, dst string, edit func(map[string]any) error) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return err
	}
	if err := edit(cfg); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	if b, err = yaml.Marshal(cfg); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}

// setProviderURL points the configuration's provider of that name and type
// at url.
func setProviderURL(cfg map[string]any, name string, kind clusterctlv1.ProviderType, url string) error {
	providers, _ := cfg["providers"].([]any)
	for _, p := range providers {
		if p, ok := p.(map[string]any); ok && p["name"] == name && p["type"] == string(kind) {
			p["url"] = url
			return nil
		}
	}
	return fmt.Errorf("providers: no %s named %s", kind, name)
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
