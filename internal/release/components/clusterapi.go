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

package components

import "path/filepath"

// ClusterAPIProvider is one of Cluster API's providers as its release
// publishes it.
type ClusterAPIProvider struct {
	// Label is clusterctl's name of the provider; File its components file.
	Label, File string
	// Package is the manager's main package; Base its kustomize overlay in
	// the Cluster API module.
	Package, Base string
	// Image is the release's image, without its tag; stagingImage the one
	// the overlay names.
	Image, stagingImage string
}

// ClusterAPIProviders are Cluster API's core, KubeadmControlPlane and kubeadm
// bootstrap providers.
var ClusterAPIProviders = []ClusterAPIProvider{
	{"cluster-api", "core-components.yaml", "sigs.k8s.io/cluster-api/core", "core/config/default",
		"registry.k8s.io/cluster-api/cluster-api-controller", "gcr.io/k8s-staging-cluster-api/cluster-api-controller"},
	{"control-plane-kubeadm", "control-plane-components.yaml", "sigs.k8s.io/cluster-api/controlplane/kubeadm", "controlplane/kubeadm/config/default",
		"registry.k8s.io/cluster-api/kubeadm-control-plane-controller", "gcr.io/k8s-staging-cluster-api/kubeadm-control-plane-controller"},
	{"bootstrap-kubeadm", "bootstrap-components.yaml", "sigs.k8s.io/cluster-api/bootstrap/kubeadm", "bootstrap/kubeadm/config/default",
		"registry.k8s.io/cluster-api/kubeadm-bootstrap-controller", "gcr.io/k8s-staging-cluster-api/kubeadm-bootstrap-controller"},
}

// ImageRef is the provider's image tagged version.
func (p ClusterAPIProvider) ImageRef(version string) string { return p.Image + ":" + version }

// Components builds the provider's components YAML from the Cluster API
// module in moduleDir, as its release of version has it.
func (p ClusterAPIProvider) Components(moduleDir, version string) ([]byte, error) {
	return Build(filepath.Join(moduleDir, p.Base), map[string]string{p.stagingImage: p.ImageRef(version)})
}
