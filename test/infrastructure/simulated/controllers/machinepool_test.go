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

package controllers

import (
	"fmt"
	"slices"
	"testing"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// pool steps plannedInstances as the reconciler does, every new instance
// bootstrapping before the next step.
type pool struct {
	instances []infrav1.SimulatedInstance
	next      int
	// most is the largest number of instances the pool ever had.
	most int
}

func (p *pool) step(t *testing.T, want int, tmpl launchTemplate) (retired []infrav1.SimulatedInstance) {
	t.Helper()
	p.instances, retired = plannedInstances(p.instances, want, tmpl, func() string {
		p.next++
		return fmt.Sprintf("i%d", p.next)
	})
	p.most = max(p.most, len(p.instances))
	return retired
}

func (p *pool) bootstrapAll() {
	for i := range p.instances {
		p.instances[i].HostPhase = infrav1.HostBootstrapped
	}
}

// of is a launch template of version, with the same data secret throughout.
func of(version string) launchTemplate {
	return launchTemplate{version: version, dataSecretName: "pool-0123456789"}
}

func versions(in []infrav1.SimulatedInstance) []string {
	var out []string
	for _, i := range in {
		out = append(out, i.Version)
	}
	return out
}

func TestPlannedInstancesScales(t *testing.T) {
	p := &pool{}
	p.step(t, 3, of("v1.35.8"))
	if got := versions(p.instances); !slices.Equal(got, []string{"v1.35.8", "v1.35.8", "v1.35.8"}) {
		t.Fatalf("scaled up to %v", got)
	}
	p.bootstrapAll()
	retired := p.step(t, 1, of("v1.35.8"))
	if len(retired) != 2 || retired[0].Name != "i1" || retired[1].Name != "i2" || p.instances[0].Name != "i3" {
		t.Fatalf("scaling down retired %v and kept %v; want the oldest two retired", retired, p.instances)
	}
}

// A new version replaces every instance one at a time: never more than one
// extra instance, never an outdated one retired before its replacement
// bootstrapped, and the pool at its size with the new version at the end.
func TestPlannedInstancesRollsToANewVersion(t *testing.T) {
	for _, want := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(want), func(t *testing.T) {
			p := &pool{}
			p.step(t, want, of("v1.35.8"))
			p.bootstrapAll()
			p.most = 0
			for range 20 {
				before := len(p.instances)
				retired := p.step(t, want, of("v1.36.3"))
				if len(retired) > 0 && (len(retired) != 1 || retired[0].Version != "v1.35.8") {
					t.Fatalf("retired %v; want one outdated instance", retired)
				}
				if after := len(p.instances); after > before {
					// A surge waits: the next step adds or retires nothing.
					again, r := plannedInstances(p.instances, want, of("v1.36.3"), func() string { return "unexpected" })
					if len(r) != 0 || !slices.Equal(again, p.instances) {
						t.Fatalf("while %s boots: %v, retired %v", p.instances[after-1].Name, again, r)
					}
				}
				p.bootstrapAll()
			}
			if got := versions(p.instances); len(got) != want || slices.Contains(got, "v1.35.8") {
				t.Fatalf("after the roll: %v; want %d instances of v1.36.3", got, want)
			}
			if p.most != want+1 {
				t.Errorf("the pool reached %d instances; want a surge of one over %d", p.most, want)
			}
		})
	}
}

// Instances found again from provider IDs have no version: they stay.
func TestPlannedInstancesKeepsInstancesOfUnknownVersion(t *testing.T) {
	found := []infrav1.SimulatedInstance{{Name: "a", HostPhase: infrav1.HostBooting}, {Name: "b", HostPhase: infrav1.HostBooting}}
	keep, retired := plannedInstances(found, 2, of("v1.36.3"), func() string { return "new" })
	if len(retired) != 0 || !slices.Equal(keep, found) {
		t.Fatalf("kept %v, retired %v; want the found instances as they are", keep, retired)
	}
}

// A new data secret name rolls the pool as a new version does, one instance
// at a time; new content under the same name (a rotated token) rolls nothing.
func TestPlannedInstancesRollOnANewDataSecretName(t *testing.T) {
	p := &pool{}
	before := launchTemplate{version: "v1.36.3", dataSecretName: "pool-aaaaaaaaaa"}
	p.step(t, 2, before)
	p.bootstrapAll()
	started := slices.Clone(p.instances)
	if retired := p.step(t, 2, before); len(retired) != 0 || !slices.Equal(p.instances, started) {
		t.Fatalf("the same name changed the pool: %v, retired %v", p.instances, retired)
	}
	after := launchTemplate{version: "v1.36.3", dataSecretName: "pool-bbbbbbbbbb"}
	p.most = 0
	for range 20 {
		if retired := p.step(t, 2, after); len(retired) > 1 || len(retired) == 1 && retired[0].DataSecretName != before.dataSecretName {
			t.Fatalf("retired %v; want one instance of the old data at a time", retired)
		}
		p.bootstrapAll()
	}
	for _, in := range p.instances {
		if in.DataSecretName != after.dataSecretName || slices.ContainsFunc(started, func(s infrav1.SimulatedInstance) bool { return s.Name == in.Name }) {
			t.Fatalf("after the roll: %v; want two new instances from %s", p.instances, after.dataSecretName)
		}
	}
	if p.most != 3 {
		t.Errorf("the pool reached %d instances; want a surge of one over 2", p.most)
	}
}

// Instances found again from provider IDs have no data secret name: they stay.
func TestPlannedInstancesKeepsInstancesOfUnknownData(t *testing.T) {
	found := []infrav1.SimulatedInstance{{Name: "a", HostPhase: infrav1.HostBooting, Version: "v1.36.3"}}
	keep, retired := plannedInstances(found, 1, of("v1.36.3"), func() string { return "new" })
	if len(retired) != 0 || !slices.Equal(keep, found) {
		t.Fatalf("kept %v, retired %v; want the found instance as it is", keep, retired)
	}
}
