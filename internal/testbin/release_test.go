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
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
)

// The upgrade specs go from the previous minor to the default release, with
// a patch the version matrix checks (one whose node commands the Go module
// proxy serves whole).
func TestUpgradeFromIsThePreviousMinor(t *testing.T) {
	from, to := UpgradeFromRelease(), DefaultRelease()
	f, err := semver.ParseTolerant(from.Kubernetes)
	if err != nil {
		t.Fatalf("KUBERNETES_UPGRADE_FROM_VERSION: %v", err)
	}
	d, err := semver.ParseTolerant(to.Kubernetes)
	if err != nil {
		t.Fatalf("KUBERNETES_VERSION: %v", err)
	}
	if f.Major != d.Major || f.Minor+1 != d.Minor {
		t.Errorf("upgrade from %s to %s: want the previous minor", from.Kubernetes, to.Kubernetes)
	}
	if !slices.Contains(MatrixVersions(), from.Kubernetes) {
		t.Errorf("upgrade from %s: not in the version matrix %v", from.Kubernetes, MatrixVersions())
	}
}

// Every node release is a patch of the matrix, of its own minor, with its
// etcd and CoreDNS; the releases the tests name are among them.
func TestNodeReleases(t *testing.T) {
	minors := map[string]bool{}
	for i, r := range NodeReleases() {
		if r.Kubernetes == "" || r.Etcd == "" || r.CoreDNS == "" {
			t.Errorf("node release %d: %+v; want VERSION/ETCD/COREDNS", i, r)
			continue
		}
		if !slices.Contains(MatrixVersions(), r.Kubernetes) {
			t.Errorf("node release %s: not in the version matrix %v", r.Kubernetes, MatrixVersions())
		}
		v, _ := semver.ParseTolerant(r.Kubernetes)
		minor := fmt.Sprintf("%d.%d", v.Major, v.Minor)
		if minors[minor] {
			t.Errorf("node release %s: a second release of v%s", r.Kubernetes, minor)
		}
		minors[minor] = true
	}
	for _, version := range []string{Versions["KUBERNETES_UPGRADE_FROM_VERSION"], MatrixVersions()[0], MatrixVersions()[len(MatrixVersions())-1]} {
		if _, err := ReleaseOf(version); err != nil {
			t.Error(err)
		}
	}
}

func TestReleaseOf(t *testing.T) {
	for _, r := range []Release{DefaultRelease(), UpgradeFromRelease(), OldestRelease(), NewestRelease()} {
		got, err := ReleaseOf(r.Kubernetes)
		if err != nil || got != r {
			t.Errorf("ReleaseOf(%s) = %+v, %v; want %+v", r.Kubernetes, got, err, r)
		}
	}
	_, err := ReleaseOf("v1.20.0")
	if err == nil || !strings.Contains(err.Error(), DefaultRelease().Kubernetes) || !strings.Contains(err.Error(), "v1.20.0") {
		t.Errorf("ReleaseOf(v1.20.0): %v; want an error naming the version and the releases there are", err)
	}
}

// Each release's commands and images have a cache path of their own, and
// only the default release's are the plain tools'.
func TestReleasePaths(t *testing.T) {
	t.Setenv("CABPK_TOOLS_CACHE", t.TempDir())
	def, from := DefaultRelease(), UpgradeFromRelease()
	for _, name := range []string{Kubeadm, Kubelet, Etcd, CoreDNS} {
		d, _ := def.toolPath(name)
		f, _ := from.toolPath(name)
		if d == f {
			t.Errorf("%s: both releases at %s", name, d)
		}
		if p, _ := toolPath(name); p != d {
			t.Errorf("%s: the tool is at %s, the default release's at %s", name, p, d)
		}
	}
	if def.NodeImagesDir() == from.NodeImagesDir() {
		t.Errorf("both releases' node images in %s", def.NodeImagesDir())
	}
	if _, err := from.Path(Kubeadm); err == nil || !strings.Contains(err.Error(), "hack/tools.sh node-release-"+from.Kubernetes) {
		t.Errorf("a missing upgrade-from kubeadm: %v; want the target that builds it", err)
	}
	if _, err := from.LoadNodeImages(); err == nil || !strings.Contains(err.Error(), from.Kubernetes) {
		t.Errorf("missing upgrade-from node images: %v; want the version named", err)
	}
}
