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

// Package components builds a provider's components YAML, what clusterctl
// installs, from the provider's kustomize base as Cluster API providers'
// releases do: the default overlay built with the managers' images set to
// the release's tags and pulled only when the node lacks them.
package components

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"
	"sigs.k8s.io/yaml"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
)

// ifNotPresent is what a release sets on every manager: bases say Always so
// that a developer's cluster picks up a rebuilt :main image.
const ifNotPresent = `[{"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "IfNotPresent"}]`

// Build runs kustomize over base (a directory holding a kustomization) with
// each image named in the base (images' keys) set to its reference, and
// every Deployment's manager pulled IfNotPresent; then the replacements,
// which see the images set.
func Build(base string, images map[string]string, replacements ...kustomizetypes.ReplacementField) ([]byte, error) {
	dir, err := os.MkdirTemp("", "components-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// An overlay in a directory of its own: kustomize takes the base as a
	// relative path.
	abs, err := filepath.Abs(base)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		return nil, err
	}
	k := kustomizetypes.Kustomization{
		TypeMeta:     kustomizetypes.TypeMeta{APIVersion: kustomizetypes.KustomizationVersion, Kind: kustomizetypes.KustomizationKind},
		Resources:    []string{rel},
		Patches:      []kustomizetypes.Patch{{Patch: ifNotPresent, Target: &kustomizetypes.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Kind: "Deployment"}}}}},
		Replacements: replacements,
	}
	for from, to := range images {
		ref, err := name.NewTag(to)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", to, err)
		}
		k.Images = append(k.Images, kustomizetypes.Image{Name: from, NewName: ref.Context().String(), NewTag: ref.TagStr()})
	}
	body, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), body, 0o600); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustomizetypes.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", base, err)
	}
	return m.AsYaml()
}

// Bootstrap is this provider's bootstrap-components.yaml, its manager's
// image set to image, as its release builds it. The manager's image holds
// the node updater too: the manager learns it from NODE_UPDATE_IMAGE.
func Bootstrap(image string) ([]byte, error) {
	const manager = "spec.template.spec.containers.[name=manager]."
	deployment := resid.ResId{Gvk: resid.Gvk{Group: "apps", Version: "v1", Kind: "Deployment"}, Name: "capi-kubeadm-bootstrap-controller-manager"}
	nodeUpdateImage := kustomizetypes.ReplacementField{Replacement: kustomizetypes.Replacement{
		Source: &kustomizetypes.SourceSelector{ResId: deployment, FieldPath: manager + "image"},
		Targets: []*kustomizetypes.TargetSelector{{
			Select:     &kustomizetypes.Selector{ResId: deployment},
			FieldPaths: []string{manager + "env.[name=NODE_UPDATE_IMAGE].value"},
		}},
	}}
	return Build(filepath.Join(repodir.Root(), "bootstrap", "kubeadm", "config", "default"), map[string]string{"controller": image}, nodeUpdateImage)
}
