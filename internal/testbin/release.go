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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Release is a Kubernetes release as the e2e nodes run it: its commands and
// the etcd and CoreDNS its kubeadm names, each built from source.
type Release struct {
	// Kubernetes is the release's version (v1.36.3).
	Kubernetes string
	// Etcd and CoreDNS are the versions of what kubeadm of that release
	// runs (v3.6.8, v1.14.2).
	Etcd    string
	CoreDNS string
}

// DefaultRelease is the release every tool and e2e node runs unless a test
// asks for another (versions.env: KUBERNETES_VERSION and its etcd and CoreDNS).
func DefaultRelease() Release {
	v := Versions
	return Release{Kubernetes: v["KUBERNETES_VERSION"], Etcd: v["ETCD_VERSION"], CoreDNS: v["COREDNS_VERSION"]}
}

// NodeReleases are the releases e2e nodes can boot, the default first
// (versions.env: NODE_RELEASES).
func NodeReleases() []Release {
	releases := []Release{DefaultRelease()}
	for _, entry := range strings.Split(Versions["NODE_RELEASES"], ",") {
		var r Release
		parts := strings.Split(entry, "/")
		if len(parts) == 3 {
			r = Release{Kubernetes: parts[0], Etcd: parts[1], CoreDNS: parts[2]}
		}
		releases = append(releases, r) // a malformed entry is a release of no version: TestNodeReleases says so
	}
	return releases
}

// ReleaseOf returns the release of a Kubernetes version among NodeReleases.
func ReleaseOf(kubernetes string) (Release, error) {
	var known []string
	for _, r := range NodeReleases() {
		if r.Kubernetes == kubernetes {
			return r, nil
		}
		known = append(known, r.Kubernetes)
	}
	return Release{}, fmt.Errorf("no e2e node release of Kubernetes %s (there are %s; versions.env lists them)", kubernetes, strings.Join(known, ", "))
}

// UpgradeFromRelease is the release the upgrade specs start their clusters
// at (versions.env: KUBERNETES_UPGRADE_FROM_VERSION).
func UpgradeFromRelease() Release { return mustRelease(Versions["KUBERNETES_UPGRADE_FROM_VERSION"]) }

// OldestRelease and NewestRelease are the releases of the oldest and the
// newest supported minor: the version matrix's ends.
func OldestRelease() Release { return mustRelease(MatrixVersions()[0]) }

func NewestRelease() Release {
	versions := MatrixVersions()
	return mustRelease(versions[len(versions)-1])
}

// mustRelease is ReleaseOf for the versions versions.env names itself; its
// unit tests keep them among NodeReleases.
func mustRelease(kubernetes string) Release {
	r, err := ReleaseOf(kubernetes)
	if err != nil {
		panic(err)
	}
	return r
}

// isDefault tells the default release from the others, which their own
// hack/tools.sh target builds.
func (r Release) isDefault() bool { return r == DefaultRelease() }

func (r Release) buildHint() string {
	if r.isDefault() {
		return "run `make tools` (hack/tools.sh) to build it"
	}
	return "run `hack/tools.sh node-release-" + r.Kubernetes + "` to build it"
}

// toolPath is where hack/tools.sh puts a command of the release: the
// Kubernetes commands, etcd and CoreDNS.
func (r Release) toolPath(name string) (string, bool) {
	switch name {
	case KubeAPIServer, KubeControllerManager, KubeScheduler, Kubeadm, Kubectl, Kubelet, KubeProxy:
		return kubernetesToolPath(name, r.Kubernetes), true
	case Etcd:
		return filepath.Join(CacheDir(), name, r.Etcd, name), true
	case CoreDNS:
		return filepath.Join(CacheDir(), name, r.CoreDNS+"-"+Versions["COREDNS_BUILD"], name), true
	}
	return "", false
}

// Path returns the path of one of the release's commands, or an error that
// says how to build it.
func (r Release) Path(name string) (string, error) {
	p, ok := r.toolPath(name)
	if !ok {
		return "", fmt.Errorf("%s is not part of a Kubernetes release", name)
	}
	if !executable(p) {
		return "", fmt.Errorf("%s %s not found (looked for %q): %s", name, r.Kubernetes, p, r.buildHint())
	}
	return p, nil
}

// NodeImagesDir is where test/tools/nodeimages writes the release's node images.
func (r Release) NodeImagesDir() string {
	v := Versions
	return filepath.Join(CacheDir(), "node-images", fmt.Sprintf("%s-%s-etcd%s-coredns%s-r%s",
		r.Kubernetes, v["KUBERNETES_TOOLS_BUILD"], r.Etcd, r.CoreDNS, v["NODE_IMAGES_REVISION"]))
}

// LoadNodeImages reads the manifest test/tools/nodeimages wrote last for the
// release, once it finished (the manifest is written after every tarball and
// the seed).
func (r Release) LoadNodeImages() (*NodeImages, error) {
	dir := r.NodeImagesDir()
	b, err := os.ReadFile(filepath.Join(dir, NodeImagesManifest))
	if err != nil {
		return nil, fmt.Errorf("the e2e nodes' images of Kubernetes %s are not built (%v): %s", r.Kubernetes, err, r.buildHint())
	}
	n := &NodeImages{Dir: dir}
	if err := json.Unmarshal(b, n); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, NodeImagesManifest), err)
	}
	return n, nil
}
