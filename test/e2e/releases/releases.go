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
// provider's components and metadata (Cluster API's from its module, as its
// release builds them; this provider's and the simulated provider's from
// their kustomize trees), cert-manager's manifest, a clusterctl
// configuration pointing at it, and the images the management cluster's
// nodes carry, since there is no registry to pull from.
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

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/components"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/gobuild"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/ociimage"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/moduledir"
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

// UpstreamBootstrapImage is the image of upstream's kubeadm bootstrap
// provider's release, at the pinned Cluster API version.
func UpstreamBootstrapImage() string {
	for _, p := range components.ClusterAPIProviders {
		if p.Label == BootstrapLabel {
			return p.ImageRef(testbin.Versions["CLUSTER_API_VERSION"])
		}
	}
	panic("components.ClusterAPIProviders has no " + BootstrapLabel)
}

// MachineImage names the Lab's machine image whose store holds every
// provider's image: the management clusters' nodes boot from it.
const MachineImage = "management"

// NodeUpdateMachineImage names the Lab's machine image whose store holds this
// provider's image, which runs the in-place node updates.
const NodeUpdateMachineImage = "node-update"

// Provider labels, as clusterctl names providers' directories and Pods'
// provider labels.
const (
	CoreLabel           = "cluster-api"
	BootstrapLabel      = "bootstrap-kubeadm"
	ControlPlaneLabel   = "control-plane-kubeadm"
	InfrastructureLabel = "infrastructure-simulated"
)

// Releases is what WriteRepository or Build wrote.
type Releases struct {
	// Repository is the clusterctl repository: <label>/<version>/ with the
	// components file and metadata.yaml, and cert-manager/<version>/.
	Repository string
	// Images are the managers' images, for a machine image (Build only).
	Images []host.ImageArchive
}

var platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

// WriteRepository writes every provider's components and metadata under
// dir/repository: Cluster API's core, KubeadmControlPlane and kubeadm
// bootstrap provider at the pinned version, this provider and the
// simulated provider with its cluster templates. It builds no image and
// needs no tool, so a suite that only generates clusters from the
// repository can use it.
func WriteRepository(dir string) (*Releases, error) {
	r := &Releases{Repository: filepath.Join(dir, "repository")}
	if err := r.writeClusterAPI(); err != nil {
		return nil, err
	}
	yml, err := components.Bootstrap(OurImage)
	if err != nil {
		return nil, err
	}
	if err := r.write(BootstrapLabel, OurVersion, "bootstrap-components.yaml", yml, filepath.Join(repodir.Root(), "metadata.yaml")); err != nil {
		return nil, err
	}
	simulated := filepath.Join(repodir.Root(), "test", "infrastructure", "simulated")
	if yml, err = components.Build(filepath.Join(simulated, "config", "default"), map[string]string{"simulated-controller": SimulatedImage}); err != nil {
		return nil, err
	}
	if err := r.write(InfrastructureLabel, SimulatedVersion, "infrastructure-components.yaml", yml, filepath.Join(simulated, "metadata.yaml")); err != nil {
		return nil, err
	}
	return r, r.writeTemplates()
}

// writeTemplates files the simulated provider's cluster templates and
// ClusterClasses beside its components, where clusterctl generate cluster
// finds a provider's flavors.
func (r *Releases) writeTemplates() error {
	src := filepath.Join(repodir.Root(), "test", "e2e", "capi", "data", "infrastructure-simulated")
	var files []string
	for _, pattern := range []string{"cluster-template*.yaml", "clusterclass-*.yaml"} {
		m, err := filepath.Glob(filepath.Join(src, pattern))
		if err != nil {
			return err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return fmt.Errorf("no cluster templates in %s", src)
	}
	for _, f := range files {
		if err := copyFile(f, r.path(InfrastructureLabel, SimulatedVersion, filepath.Base(f))); err != nil {
			return err
		}
	}
	return nil
}

// Build writes the repository as WriteRepository does, with cert-manager's
// manifest, and the images of every provider: Cluster API's and
// cert-manager's from the tool cache (hack/tools.sh upstream-releases),
// this provider's from hack/release and the simulated provider's built here.
func Build(dir string) (*Releases, error) {
	upstream, err := testbin.LoadUpstreamReleases()
	if err != nil {
		return nil, err
	}
	r, err := WriteRepository(dir)
	if err != nil {
		return nil, err
	}
	certManager := filepath.Join("cert-manager", testbin.Versions["CERT_MANAGER_VERSION"], testbin.CertManagerManifest)
	if err := copyFile(filepath.Join(upstream.Repository(), certManager), filepath.Join(r.Repository, certManager)); err != nil {
		return nil, err
	}
	for _, i := range upstream.Images {
		r.Images = append(r.Images, host.ImageArchive{Ref: i.Ref, Path: filepath.Join(upstream.Dir, i.File)})
	}
	ours, err := BuildOurImage(filepath.Join(dir, "ours"))
	if err != nil {
		return nil, err
	}
	simulated, err := buildSimulatedImage(filepath.Join(dir, "simulated"))
	if err != nil {
		return nil, err
	}
	r.Images = append(r.Images, ours, simulated)
	return r, nil
}

// writeClusterAPI writes Cluster API's providers as their releases have
// them, from the module this repository requires.
func (r *Releases) writeClusterAPI() error {
	module, err := moduledir.Dir("sigs.k8s.io/cluster-api", "")
	if err != nil {
		return err
	}
	version := testbin.Versions["CLUSTER_API_VERSION"]
	for _, p := range components.ClusterAPIProviders {
		yml, err := p.Components(module, version)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Label, err)
		}
		if err := r.write(p.Label, version, p.File, yml, filepath.Join(module, "metadata.yaml")); err != nil {
			return err
		}
	}
	return nil
}

// write files a provider's components and a copy of its metadata under its
// label and version.
func (r *Releases) write(label, version, file string, yml []byte, metadata string) error {
	dir := filepath.Join(r.Repository, label, version)
	if err := writeFile(filepath.Join(dir, file), yml); err != nil {
		return err
	}
	return copyFile(metadata, filepath.Join(dir, "metadata.yaml"))
}

// BuildOurImage runs the release tool for this machine's platform, as make
// image does, and returns the image (OurImage) it wrote under out.
func BuildOurImage(out string) (host.ImageArchive, error) {
	// The tool runs in its own module's directory.
	out, err := filepath.Abs(out)
	if err != nil {
		return host.ImageArchive{}, err
	}
	cmd := exec.Command("go", "run", "./release", "--image-only", "--out", out,
		"--registry", "ghcr.io/cabpk-formats", "--tag", OurVersion, "--platforms", platform.OS+"/"+platform.Architecture)
	cmd.Dir = repodir.ToolsModule()
	if b, err := cmd.CombinedOutput(); err != nil {
		return host.ImageArchive{}, fmt.Errorf("building this provider's image: %w\n%s", err, b)
	}
	return host.ImageArchive{Ref: OurImage, Path: filepath.Join(out, "cluster-api-kubeadm-bootstrap-controller-"+platform.Architecture+".tar")}, nil
}

// buildSimulatedImage builds the simulated provider's image: its manager,
// static, as this provider's.
func buildSimulatedImage(out string) (host.ImageArchive, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return host.ImageArchive{}, err
	}
	ref, err := name.NewTag(SimulatedImage)
	if err != nil {
		return host.ImageArchive{}, err
	}
	binary, err := gobuild.Static(repodir.TestModule(), "./infrastructure/simulated/cmd/manager", platform)
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
	return host.ImageArchive{Ref: SimulatedImage, Path: archive}, nil
}

// Config is a clusterctl configuration for the repository, as a user of
// the lab writes it: every provider by its components' path, cert-manager's
// manifest, the simulated cloud's URL, this provider's format gates and
// ClusterClass on, and no check for a newer clusterctl (nothing outside the
// lab is reachable). clusterctl init and generate read it with --config.
func (r *Releases) Config(cloudURL string) ([]byte, error) {
	type provider struct {
		Name string `json:"name"`
		URL  string `json:"url"`
		Type string `json:"type"`
	}
	capi := testbin.Versions["CLUSTER_API_VERSION"]
	cfg := map[string]any{
		"providers": []provider{
			{"cluster-api", r.path(CoreLabel, capi, "core-components.yaml"), "CoreProvider"},
			{"kubeadm", r.path(BootstrapLabel, OurVersion, "bootstrap-components.yaml"), "BootstrapProvider"},
			{"kubeadm", r.path(ControlPlaneLabel, capi, "control-plane-components.yaml"), "ControlPlaneProvider"},
			{"simulated", r.path(InfrastructureLabel, SimulatedVersion, "infrastructure-components.yaml"), "InfrastructureProvider"},
		},
	}
	if cm, ok := r.CertManager(); ok {
		cfg["cert-manager"] = cm
	}
	for k, v := range map[string]string{
		"SIMULATED_CLOUD_URL":                   cloudURL,
		"EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION": "true",
		"EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW":      "true",
		"CLUSTER_TOPOLOGY":                      "true",
		"CLUSTERCTL_DISABLE_VERSIONCHECK":       "true",
	} {
		cfg[k] = v
	}
	return yaml.Marshal(cfg)
}

// CertManager is clusterctl's cert-manager setting for the repository's
// manifest, if Build wrote it.
func (r *Releases) CertManager() (map[string]string, bool) {
	version := testbin.Versions["CERT_MANAGER_VERSION"]
	manifest := r.path("cert-manager", version, testbin.CertManagerManifest)
	if _, err := os.Stat(manifest); err != nil {
		return nil, false
	}
	return map[string]string{"url": manifest, "version": version}, true
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
