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

package claims

import (
	"testing"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// TestVersionClaimsWhatKubeadmUpgrades: a later patch or the next minor,
// within the supported range, is claimed at the object's version field;
// anything else (down, two minors, unsupported, unparsable) is not.
func TestVersionClaimsWhatKubeadmUpgrades(t *testing.T) {
	for _, tc := range []struct {
		current, desired string
		want             bool
	}{
		{"v1.36.1", "v1.36.3", true},
		{"v1.35.8", "v1.36.3", true},
		{"v1.36.3", "v1.36.3", false},
		{"v1.36.3", "v1.36.1", false},
		{"v1.36.3", "v1.35.8", false},
		{"v1.34.2", "v1.36.3", false},
		{"v1.37.0", "v1.38.0", false},
		{"v1.29.0", "v1.30.0", false},
		{"v1.36.3", "latest", false},
	} {
		p, err := Version(tc.current, tc.desired, MachineSetVersion)
		if err != nil {
			t.Fatal(err)
		}
		if p.IsDefined() != tc.want {
			t.Errorf("%s to %s: claimed %v, want %v", tc.current, tc.desired, p.IsDefined(), tc.want)
			continue
		}
		if want := `{"spec":{"template":{"spec":{"version":"` + tc.desired + `"}}}}`; tc.want && string(p.Patch) != want {
			t.Errorf("%s to %s: patch %s, want %s", tc.current, tc.desired, p.Patch, want)
		}
	}
}

// TestVersionBringsGraduatedGates: KubeadmControlPlane drops
// ControlPlaneKubeletLocalMode from v1.36, where kubeadm locks it on; the
// drop is claimed with a move to v1.36 or later (the whole featureGates
// when nothing else is left), never without a move, and another gate's
// change never.
func TestVersionBringsGraduatedGates(t *testing.T) {
	withGates := func(gates map[string]bool) upstreambootstrapv1.KubeadmConfigSpec {
		s := joined()
		s.ClusterConfiguration.FeatureGates = gates
		return s
	}
	for _, tc := range []struct {
		name             string
		current, desired map[string]bool
		movesTo          string
		left             string
	}{
		{"to v1.36", map[string]bool{"ControlPlaneKubeletLocalMode": true}, nil, "v1.36.3", ""},
		{"with another gate", map[string]bool{"ControlPlaneKubeletLocalMode": true, "Other": true}, map[string]bool{"Other": true}, "v1.36.3", ""},
		{"no move", map[string]bool{"ControlPlaneKubeletLocalMode": true}, nil, "", "clusterConfiguration"},
		{"to v1.35", map[string]bool{"ControlPlaneKubeletLocalMode": true}, nil, "v1.35.9", "clusterConfiguration"},
		{"another gate changes", map[string]bool{"ControlPlaneKubeletLocalMode": true, "Other": true}, nil, "v1.36.3", "clusterConfiguration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current, desired := config(withGates(tc.current)), config(withGates(tc.desired))
			patch, err := Claim(current, desired, ConfigSpec, tc.movesTo)
			if err != nil {
				t.Fatal(err)
			}
			if left := leftAfter(t, current, desired, patch, ConfigSpec); left != tc.left {
				t.Errorf("after the claim %s, %q differs, want %q", patch.Patch, left, tc.left)
			}
		})
	}
}
