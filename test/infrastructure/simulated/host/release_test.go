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
	"strings"
	"testing"
)

func TestReleaseFor(t *testing.T) {
	l := &Lab{releases: []*labRelease{
		{NodeRelease: NodeRelease{KubernetesVersion: "v1.36.3"}, store: "new"},
		{NodeRelease: NodeRelease{KubernetesVersion: "v1.35.8"}, store: "old"},
	}}
	for _, c := range []struct{ version, image, store, err string }{
		{version: "", store: "new"},
		{version: "v1.36.3", store: "new"},
		{version: "v1.35.8", store: "old"},
		{version: "v1.36.3", image: "management", store: "new"},
		{version: "v1.35.8", image: "management", store: "old"},
		{version: "v1.34.12", err: "no node image of Kubernetes v1.34.12 (it has v1.36.3, v1.35.8)"},
	} {
		r, err := l.releaseFor(HostSpec{Name: "ns/m", KubernetesVersion: c.version, Image: c.image})
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("version %q image %q: error %v; want %q", c.version, c.image, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("version %q image %q: %v", c.version, c.image, err)
		case c.err == "" && r.store != c.store:
			t.Errorf("version %q image %q: store %s; want %s", c.version, c.image, r.store, c.store)
		}
	}
}

// TestStoreFor: a host boots its release's store, or its machine image's
// store of its release; an image the Lab lacks is an error.
func TestStoreFor(t *testing.T) {
	old := &labRelease{NodeRelease: NodeRelease{KubernetesVersion: "v1.35.8"}, store: "old"}
	l := &Lab{images: map[string]*machineImage{"node-update": {stores: map[string]string{"v1.35.8": "node-update-old"}}}}
	if store, err := l.storeFor(HostSpec{Name: "m"}, old); err != nil || store != "old" {
		t.Errorf("no image: %s %v", store, err)
	}
	if store, err := l.storeFor(HostSpec{Name: "m", Image: "node-update"}, old); err != nil || store != "node-update-old" {
		t.Errorf("node-update: %s %v", store, err)
	}
	if _, err := l.storeFor(HostSpec{Name: "m", Image: "management"}, old); err == nil || !strings.Contains(err.Error(), `no machine image "management"`) {
		t.Errorf("an image the Lab lacks: %v", err)
	}
}

func TestCheckReleases(t *testing.T) {
	if err := checkReleases(nil); err == nil {
		t.Error("no release: accepted")
	}
	if err := checkReleases([]NodeRelease{{KubernetesVersion: "v1.36.3"}, {KubernetesVersion: "v1.36.3"}}); err == nil {
		t.Error("one version twice: accepted")
	}
	if err := checkReleases([]NodeRelease{{KubernetesVersion: "v1.36.3"}, {KubernetesVersion: "v1.35.8"}}); err != nil {
		t.Error(err)
	}
}

func TestOthersShared(t *testing.T) {
	rs := []NodeRelease{
		{KubernetesVersion: "a", Shared: []ImageArchive{{Ref: "a/proxy"}}},
		{KubernetesVersion: "b", Shared: []ImageArchive{{Ref: "b/proxy"}, {Ref: "b/dns"}}},
	}
	if got := othersShared(rs, 0); len(got) != 2 || got[0].Ref != "b/proxy" {
		t.Errorf("a gets %v; want b's", got)
	}
	if got := othersShared(rs, 1); len(got) != 1 || got[0].Ref != "a/proxy" {
		t.Errorf("b gets %v; want a's", got)
	}
}
