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

// Package releases assembles what a management cluster installs with
// clusterctl, as users get it: one clusterctl repository with every
// provider's components and metadata (Cluster API's and cert-manager's from
// hack/upstreamreleases, this provider's from hack/release, the simulated
// provider's from its kustomize tree), a clusterctl configuration pointing at
// it, and the images the management cluster's nodes carry, since there is no
// registry to pull from.
package releases

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/components"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/gobuild"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ociimage"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// Versions and images of the providers built from this tree.
const (
	// OurVersion is this provider's release version, as make release tags it.
	OurVersion = "v0.1.0"
	// OurImage is this provider's image as make image tags it.
	OurImage = "ghcr.io/cabpk-formats/cluster-api-kubeadm-bootstrap-controller:" + OurVersion
	// SimulatedVersion is the simulated provider's release version.
	SimulatedVersion = "v0.1.0"
	// SimulatedImage is the simulated provider's image, under a registry
	// that does not exist: nodes must have it in their store.
	SimulatedImage = "registry.cabpk-formats.test/simulated-infrastructure-controller:" + SimulatedVersion
)

// Provider labels, as clusterctl names providers' directories and Pods'
// provider labels.
const (
	CoreLabel           = "cluster-api"
	BootstrapLabel      = "bootstrap-kubeadm"
	ControlPlaneLabel   = "control-plane-kubeadm"
	InfrastructureLabel = "infrastructure-simulated"
)

// Releases is what Build wrote.
type Releases struct {
	// Repository is the clusterctl repository: <label>/<version>/ with the
	// components file and metadata.yaml, and cert-manager/<version>/.
	Repository string
	// Images are the managers' images, for a machine image.
	Images []host.ImageArchive
}

var platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

// Build writes the repository and this tree's images under dir; Cluster
// API's and cert-manager's come from the tool cache (hack/tools.sh
// upstream-releases).
func Build(dir string) (*Releases, error) {
	upstream, err := testbin.LoadUpstreamReleases()
	if err != nil {
		return nil, err
	}
	r := &Releases{Repository: filepath.Join(dir, "repository")}
	if err := os.CopyFS(r.Repository, os.DirFS(upstream.Repository())); err != nil {
		return nil, fmt.Errorf("copying the upstream repository: %w", err)
	}
	for _, i := range upstream.Images {
		r.Images = append(r.Images, host.ImageArchive{Ref: i.Ref, Path: filepath.Join(upstream.Dir, i.File)})
	}
	ours, err := r.addOurs(filepath.Join(dir, "ours"))
	if err != nil {
		return nil, err
	}
	simulated, err := r.addSimulated(filepath.Join(dir, "simulated"))
	if err != nil {
		return nil, err
	}
	r.Images = append(r.Images, ours, simulated)
	return r, nil
}

// addOurs runs the release tool for this machine's platform, as make
// release does, and files its components under the bootstrap provider's
// label.
func (r *Releases) addOurs(out string) (host.ImageArchive, error) {
	cmd := exec.Command("go", "run", "./hack/release", "--out", out,
		"--registry", "ghcr.io/cabpk-formats", "--tag", OurVersion, "--platforms", platform.OS+"/"+platform.Architecture)
	cmd.Dir = repodir.Root()
	if b, err := cmd.CombinedOutput(); err != nil {
		return host.ImageArchive{}, fmt.Errorf("building this provider's release: %w\n%s", err, b)
	}
	for _, f := range []string{"bootstrap-components.yaml", "metadata.yaml"} {
		if err := copyFile(filepath.Join(out, f), filepath.Join(r.Repository, BootstrapLabel, OurVersion, f)); err != nil {
			return host.ImageArchive{}, err
		}
	}
	return host.ImageArchive{Ref: OurImage, Path: filepath.Join(out, "cluster-api-kubeadm-bootstrap-controller-"+platform.Architecture+".tar")}, nil
}

// addSimulated builds the simulated provider's image (its manager, static,
// as this provider's) and its components from its kustomize tree.
func (r *Releases) addSimulated(out string) (host.ImageArchive, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return host.ImageArchive{}, err
	}
	ref, err := name.NewTag(SimulatedImage)
	if err != nil {
		return host.ImageArchive{}, err
	}
	binary, err := gobuild.Static("./test/infrastructure/simulated/cmd/manager", platform)
	if err != nil {
		return host.ImageArchive{}, err
	}
	img, err := ociimage.StaticBinary(binary, "manager", platform, map[string]string{"org.opencontainers.image.version": SimulatedVersion})
	if err != nil {
		return host.ImageArchive{}, err
	}
	archive := filepath.Join(out, "simulated-infrastructure-controller.tar")
	if err := tarball.WriteToFile(archive, ref, img); err != nil {
		return host.ImageArchive{}, err
	}
	src := filepath.Join(repodir.Root(), "test", "infrastructure", "simulated")
	yml, err := components.Build(filepath.Join(src, "config", "default"), map[string]string{"simulated-controller": SimulatedImage})
	if err != nil {
		return host.ImageArchive{}, err
	}
	dst := filepath.Join(r.Repository, InfrastructureLabel, SimulatedVersion)
	if err := writeFile(filepath.Join(dst, "infrastructure-components.yaml"), yml); err != nil {
		return host.ImageArchive{}, err
	}
	if err := copyFile(filepath.Join(src, "metadata.yaml"), filepath.Join(dst, "metadata.yaml")); err != nil {
		return host.ImageArchive{}, err
	}
	return host.ImageArchive{Ref: SimulatedImage, Path: archive}, nil
}

// Config is a clusterctl configuration for the repository: every provider
// by its components' path, cert-manager's manifest, and variables (the
// simulated cloud's URL, the gates); clusterctl init and generate read it
// with --config.
func (r *Releases) Config(variables map[string]string) ([]byte, error) {
	type provider struct {
		Name string `json:"name"`
		URL  string `json:"url"`
		Type string `json:"type"`
	}
	capi := testbin.Versions["CLUSTER_API_VERSION"]
	certManager := testbin.Versions["CERT_MANAGER_VERSION"]
	cfg := map[string]any{
		"providers": []provider{
			{"cluster-api", r.path(CoreLabel, capi, "core-components.yaml"), "CoreProvider"},
			{"kubeadm", r.path(BootstrapLabel, OurVersion, "bootstrap-components.yaml"), "BootstrapProvider"},
			{"kubeadm", r.path(ControlPlaneLabel, capi, "control-plane-components.yaml"), "ControlPlaneProvider"},
			{"simulated", r.path(InfrastructureLabel, SimulatedVersion, "infrastructure-components.yaml"), "InfrastructureProvider"},
		},
		"cert-manager": map[string]string{"url": r.path("cert-manager", certManager, "cert-manager.yaml"), "version": certManager},
	}
	for k, v := range variables {
		cfg[k] = v
	}
	return yaml.Marshal(cfg)
}

func (r *Releases) path(label, version, file string) string {
	return filepath.Join(r.Repository, label, version, file)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return writeFile(dst, b)
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
