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

package testbin

import (
	"fmt"
	"path/filepath"
)

// NodeImage is one image of the e2e nodes: what `kubeadm config images list`
// names (and the test image), as a docker-archive tarball.
type NodeImage struct {
	// Component is what the image runs: kube-apiserver, etcd, pause, ...
	Component string `json:"component"`
	// Ref is the image's tag, exactly as kubeadm and the kubelet ask for it.
	Ref string `json:"ref"`
	// File is the tarball's name in the images directory.
	File string `json:"file"`
}

// NodeImages is what test/tools/nodeimages wrote for the pinned versions.
type NodeImages struct {
	// Dir holds the tarballs, the manifest and the seed.
	Dir    string      `json:"-"`
	Images []NodeImage `json:"images"`
	// ContainerdVersion is the containerd that unpacked the seed.
	ContainerdVersion string `json:"containerdVersion"`
}

// Image returns the image of a component.
func (n *NodeImages) Image(component string) (NodeImage, error) {
	for _, i := range n.Images {
		if i.Component == component {
			return i, nil
		}
	}
	return NodeImage{}, fmt.Errorf("no %s image in %s", component, n.Dir)
}

// ContainerdSeed is a containerd root with every image imported and
// unpacked: a node's containerd starts from a copy of it instead of
// importing the tarballs again.
func (n *NodeImages) ContainerdSeed() string { return filepath.Join(n.Dir, NodeImagesSeedDir) }

// Names of what test/tools/nodeimages writes into NodeImagesDir.
const (
	NodeImagesManifest = "images.json"
	NodeImagesSeedDir  = "containerd-seed"
)

// TestImage is the component name of the image the e2e tests run pods from
// (Debian's static busybox: a shell, nslookup, wget, an HTTP server).
const TestImage = "busybox"

// FrameworkPauseImage is the component name of the pause image tagged as
// Cluster API's e2e framework names it.
const FrameworkPauseImage = "framework-pause"

// NodeImagesDir is where test/tools/nodeimages writes the images of the default
// release (hack/tools.sh node-images).
func NodeImagesDir() string { return DefaultRelease().NodeImagesDir() }

// LoadNodeImages reads the default release's node images.
func LoadNodeImages() (*NodeImages, error) { return DefaultRelease().LoadNodeImages() }
