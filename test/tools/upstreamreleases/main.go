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

// Command upstreamreleases builds from source, without a container engine,
// what Cluster API's and cert-manager's releases publish for clusterctl:
//
//   - each manager's image, tagged as the release tags it, as a
//     docker-archive tarball: Cluster API core, KubeadmControlPlane and the
//     kubeadm bootstrap provider from the Cluster API module this repository
//     requires, cert-manager's controller, webhook and cainjector from
//     hack/certmanager's build;
//
//   - a clusterctl repository: each provider's components YAML (the
//     kustomize build of its default overlay, as its release builds it) and
//     metadata.yaml, and cert-manager's manifest.
//
// The e2e management clusters' hosts carry the images, as a cloud's machine
// image would (there is no registry), and clusterctl installs from the
// repository. hack/tools.sh upstream-releases runs it; internal/testbin finds
// what it wrote.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/components"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/gobuild"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/ociimage"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/moduledir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

// certManagerImages are cert-manager's components by the binary name
// hack/certmanager builds; each image is quay.io/jetstack/cert-manager-<name>,
// as its chart names them.
var certManagerImages = []string{"controller", "webhook", "cainjector"}

func main() {
	out := flag.String("out", testbin.UpstreamReleasesDir(), "directory to write the images, the repository and their manifest into")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintf(os.Stderr, "upstreamreleases: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[upstreamreleases] "+format+"\n", args...)
}

func run(out string) error {
	if _, err := testbin.LoadUpstreamReleases(); err == nil && out == testbin.UpstreamReleasesDir() {
		return nil // built already
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	releases := testbin.UpstreamReleases{Dir: out}
	clusterAPI, err := clusterAPIReleases(out)
	if err != nil {
		return err
	}
	certManager, err := certManagerRelease(out)
	if err != nil {
		return err
	}
	releases.Images = append(clusterAPI, certManager...)
	b, err := json.MarshalIndent(releases, "", "  ")
	if err != nil {
		return err
	}
	// Written last: its presence says the directory is complete.
	return os.WriteFile(filepath.Join(out, testbin.UpstreamReleasesManifest), b, 0o644)
}

var platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

// clusterAPIReleases writes each Cluster API provider's image, components
// and metadata.
func clusterAPIReleases(out string) ([]testbin.NodeImage, error) {
	version := testbin.Versions["CLUSTER_API_VERSION"]
	module, err := moduledir.Dir("sigs.k8s.io/cluster-api", "")
	if err != nil {
		return nil, err
	}
	metadata, err := os.ReadFile(filepath.Join(module, "metadata.yaml"))
	if err != nil {
		return nil, err
	}
	var images []testbin.NodeImage
	for _, p := range components.ClusterAPIProviders {
		start := time.Now()
		ref := p.ImageRef(version)
		binary, err := gobuild.Static(repodir.TestModule(), p.Package, platform, versionStamp(version))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Label, err)
		}
		image, err := writeImage(out, p.Label, ref, binary, "manager")
		if err != nil {
			return nil, err
		}
		yaml, err := p.Components(module, version)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Label, err)
		}
		dir := filepath.Join(out, testbin.UpstreamRepositoryDir, p.Label, version)
		if err := writeFiles(dir, map[string][]byte{p.File: yaml, "metadata.yaml": metadata}); err != nil {
			return nil, err
		}
		logf("%s %s (%s) in %s", p.Label, version, ref, time.Since(start).Round(time.Millisecond))
		images = append(images, image)
	}
	return images, nil
}

// certManagerRelease writes cert-manager's images, from the binaries
// hack/tools.sh cert-manager built, and its manifest.
func certManagerRelease(out string) ([]testbin.NodeImage, error) {
	version := testbin.Versions["CERT_MANAGER_VERSION"]
	dir := testbin.CertManagerDir()
	var images []testbin.NodeImage
	for _, component := range certManagerImages {
		binary, err := os.ReadFile(filepath.Join(dir, component))
		if err != nil {
			return nil, fmt.Errorf("cert-manager's %s is not built (%v): run hack/tools.sh cert-manager", component, err)
		}
		ref := "quay.io/jetstack/cert-manager-" + component + ":" + version
		image, err := writeImage(out, "cert-manager-"+component, ref, binary, component)
		if err != nil {
			return nil, err
		}
		images = append(images, image)
	}
	manifest, err := os.ReadFile(filepath.Join(dir, testbin.CertManagerManifest))
	if err != nil {
		return nil, err
	}
	repo := filepath.Join(out, testbin.UpstreamRepositoryDir, "cert-manager", version)
	if err := writeFiles(repo, map[string][]byte{testbin.CertManagerManifest: manifest}); err != nil {
		return nil, err
	}
	logf("cert-manager %s", version)
	return images, nil
}

// writeImage writes the image of one static binary, run as /entrypoint.
func writeImage(out, component, ref string, binary []byte, entrypoint string) (testbin.NodeImage, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return testbin.NodeImage{}, err
	}
	img, err := ociimage.StaticBinary(binary, entrypoint, platform, map[string]string{"org.opencontainers.image.version": tag.TagStr()})
	if err != nil {
		return testbin.NodeImage{}, err
	}
	file := component + ".tar"
	if err := tarball.WriteToFile(filepath.Join(out, file), tag, img); err != nil {
		return testbin.NodeImage{}, fmt.Errorf("writing %s: %w", ref, err)
	}
	return testbin.NodeImage{Component: component, Ref: ref, File: file}, nil
}

// versionStamp is the linker flags of a Cluster API release's version
// stamp, which its managers log and report.
func versionStamp(version string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	v := "sigs.k8s.io/cluster-api/version."
	return fmt.Sprintf("-X %sgitVersion=%s -X %sgitMajor=%s -X %sgitMinor=%s -X %sgitTreeState=clean", v, version, v, major, v, minor, v)
}

func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}
