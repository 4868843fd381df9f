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

package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// NodeRelease is what makes a host a node of one Kubernetes release: the
// commands of its image and the containerd store of the release's images. A
// cloud keeps a machine image per Kubernetes version; a Lab keeps a
// NodeRelease per version, and a host boots the one its spec asks for.
type NodeRelease struct {
	// KubernetesVersion is the release's version (v1.36.3).
	KubernetesVersion string
	// Tools are the commands each host's image has in /usr/local/bin
	// (kubelet, kubeadm, kubectl, ignition), as paths of this machine.
	Tools map[string]string
	// ContainerdSeed is a containerd root holding the release's node images
	// (test/tools/nodeimages); PauseImage is the sandbox image among them.
	ContainerdSeed string
	PauseImage     string
	// Shared are the release's images that nodes of the Lab's other
	// releases run too: during an upgrade the new kube-proxy and CoreDNS run
	// on the old nodes, and the old ones on new nodes until they are
	// replaced. There is no registry to pull them from.
	Shared []ImageArchive
}

// labRelease is a NodeRelease as the Lab's hosts boot it: store is the
// containerd store a host's root starts as a copy of.
type labRelease struct {
	NodeRelease
	store string
}

// releasesDir holds, in a Lab's state directory, the stores of releases
// that take other releases' shared images.
const releasesDir = "node-releases"

// checkReleases refuses options that name no release or one version twice.
func checkReleases(releases []NodeRelease) error {
	if len(releases) == 0 {
		return errors.New("a lab needs a node release")
	}
	seen := map[string]bool{}
	for _, r := range releases {
		if r.KubernetesVersion == "" || seen[r.KubernetesVersion] {
			return fmt.Errorf("node release %q: each needs a Kubernetes version of its own", r.KubernetesVersion)
		}
		seen[r.KubernetesVersion] = true
	}
	return nil
}

// prepareReleases gives every release its store: its seed itself when the
// Lab has one release, else a copy with the other releases' shared images.
func (l *Lab) prepareReleases() error {
	for i, r := range l.opts.Releases {
		lr := &labRelease{NodeRelease: r, store: r.ContainerdSeed}
		if len(l.opts.Releases) > 1 {
			lr.store = filepath.Join(l.stateDir, releasesDir, r.KubernetesVersion, "containerd")
			if err := os.RemoveAll(lr.store); err != nil {
				return err
			}
			if err := copySeed(r.ContainerdSeed, lr.store); err != nil {
				return fmt.Errorf("node release %s: %w", r.KubernetesVersion, err)
			}
			if _, err := ImportImages(lr.store, othersShared(l.opts.Releases, i)); err != nil {
				return fmt.Errorf("node release %s: %w", r.KubernetesVersion, err)
			}
		}
		l.releases = append(l.releases, lr)
	}
	return nil
}

// othersShared is what every release but the i-th shares.
func othersShared(releases []NodeRelease, i int) []ImageArchive {
	var out []ImageArchive
	for j, r := range releases {
		if j != i {
			out = append(out, r.Shared...)
		}
	}
	return out
}

// releaseFor is the release a host boots: the one of its spec's Kubernetes
// version, the first one when it names none.
func (l *Lab) releaseFor(spec HostSpec) (*labRelease, error) {
	if spec.KubernetesVersion == "" {
		return l.releases[0], nil
	}
	var have []string
	for _, r := range l.releases {
		if r.KubernetesVersion != spec.KubernetesVersion {
			have = append(have, r.KubernetesVersion)
			continue
		}
		return r, nil
	}
	return nil, fmt.Errorf("host %s: the lab has no node image of Kubernetes %s (it has %s)",
		spec.Name, spec.KubernetesVersion, strings.Join(have, ", "))
}
