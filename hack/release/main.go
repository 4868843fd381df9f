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

// Command release builds what an operator installs in place of upstream's
// kubeadm bootstrap provider, without a Docker engine:
//
//   - the manager's container image, one docker-archive tarball per
//     platform (static CGO_ENABLED=0 binaries on an empty base made here:
//     the manager, run as a non-root user, and the node updater its
//     in-place updates run on nodes), which `docker load`, `ctr images
//     import` and `kind load image-archive` take;
//
//   - bootstrap-components.yaml: the kustomize build of the manifests with
//     that image, clusterctl's ${VAR} placeholders left for clusterctl;
//
//   - metadata.yaml, and checksums.txt over everything.
//
//     go -C hack run ./release --out "$PWD/out" --registry ghcr.io/cabpk-formats --tag v0.1.0 \
//     [--platforms linux/amd64,linux/arm64] [--image-only]
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/components"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/gobuild"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/ociimage"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
)

// ImageName is the manager image's repository name under the registry, as
// upstream names its kubeadm bootstrap controller.
const ImageName = "cluster-api-kubeadm-bootstrap-controller"

type options struct {
	out       string
	registry  string
	tag       string
	platforms string
	imageOnly bool
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "out", "directory for the artifacts")
	flag.StringVar(&o.registry, "registry", "ghcr.io/cabpk-formats", "registry (and path) the image is tagged for")
	flag.StringVar(&o.tag, "tag", "v0.1.0", "image tag and release version")
	flag.StringVar(&o.platforms, "platforms", "linux/amd64,linux/arm64", "platforms to build images for")
	flag.BoolVar(&o.imageOnly, "image-only", false, "build the images only")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	ref, err := name.NewTag(o.registry + "/" + ImageName + ":" + o.tag)
	if err != nil {
		return fmt.Errorf("image reference: %w", err)
	}
	for _, p := range strings.Split(o.platforms, ",") {
		platform, err := v1.ParsePlatform(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		path := filepath.Join(o.out, ImageTarball(platform.Architecture))
		if err := WriteImage(path, ref, *platform); err != nil {
			return fmt.Errorf("image for %s: %w", platform, err)
		}
		fmt.Fprintf(os.Stderr, "release: wrote %s (%s)\n", path, ref)
	}
	if o.imageOnly {
		return nil
	}
	components, err := Components(ref.String())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "bootstrap-components.yaml"), components, 0o644); err != nil {
		return err
	}
	metadata, err := os.ReadFile(filepath.Join(repodir.Root(), "metadata.yaml"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "metadata.yaml"), metadata, 0o644); err != nil {
		return err
	}
	return writeChecksums(o.out)
}

// ImageTarball is the file name of the image tarball for an architecture.
func ImageTarball(arch string) string {
	return ImageName + "-" + arch + ".tar"
}

// WriteImage builds the manager and the node updater for platform and
// writes their image, tagged ref, as a docker-archive tarball at path.
func WriteImage(path string, ref name.Tag, platform v1.Platform) error {
	manager, err := gobuild.Static(repodir.Root(), "./bootstrap/kubeadm/cmd/manager", platform)
	if err != nil {
		return err
	}
	updater, err := gobuild.Static(repodir.Root(), "./bootstrap/kubeadm/cmd/node-updater", platform)
	if err != nil {
		return err
	}
	img, err := Image(manager, updater, platform, ref.TagStr())
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, ref, img)
}

// Image is the manager image: /manager, run as a non-root user, and
// /node-updater, which the manager's in-place updates run on nodes, on an
// empty base.
func Image(manager, updater []byte, platform v1.Platform, version string) (v1.Image, error) {
	return ociimage.StaticBinary(manager, "manager", platform, map[string]string{
		"org.opencontainers.image.title":       ImageName,
		"org.opencontainers.image.description": "Cluster API kubeadm bootstrap provider with pluggable bootstrap formats (cloud-config, ignition, raw)",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}, ociimage.File(strings.TrimPrefix(rawv1.NodeUpdaterCommand, "/"), 0o755, updater))
}

// Components is the kustomize build of the default manifests with the
// manager image set to image.
func Components(image string) ([]byte, error) {
	return components.Bootstrap(image)
}

func writeChecksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var lines []string
	for _, e := range entries {
		if e.IsDir() || e.Name() == "checksums.txt" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+e.Name())
	}
	sort.Strings(lines)
	return os.WriteFile(filepath.Join(dir, "checksums.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
