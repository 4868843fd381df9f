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

package kubeadmconfig

import (
	"strings"
	"testing"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
)

func joinPlan(format bootstrapv1.Format, token string) *plan.Plan {
	return &plan.Plan{Format: format, Action: plan.ActionJoin, Kubeadm: plan.Kubeadm{
		Documents: []string{"apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: " + token + "\n"},
	}}
}

func mustRevision(t *testing.T, cfg string, p *plan.Plan, token string) string {
	t.Helper()
	name, err := revisionName(cfg, p, token)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// A revision's name depends on what the instances get, not on the token in it.
func TestRevisionNameIgnoresTheToken(t *testing.T) {
	const a, b = "abcdef.0123456789abcdef", "ghijkl.0123456789abcdef"
	first := mustRevision(t, "pool", joinPlan(bootstrapv1.CloudConfig, a), a)
	if got := mustRevision(t, "pool", joinPlan(bootstrapv1.CloudConfig, b), b); got != first {
		t.Errorf("a rotated token changed the name from %s to %s", first, got)
	}
	if got := mustRevision(t, "pool", joinPlan(bootstrapv1.Ignition, a), a); got == first {
		t.Errorf("another format kept the name %s", got)
	}
	if got := mustRevision(t, "pool2", joinPlan(bootstrapv1.CloudConfig, a), a); got == "pool2-"+first[len("pool-"):] {
		t.Errorf("two configs share the digest of %s", got)
	}
	if !isRevisionOf(first, "pool") || isRevisionOf(first, "poo") || isRevisionOf("pool", "pool") || isRevisionOf("pool-kubeconfig", "pool") {
		t.Errorf("isRevisionOf does not tell %s from other names", first)
	}
}

// Names cut short to fit a Secret still differ by config and stay valid.
func TestRevisionNameOfALongConfigName(t *testing.T) {
	long := strings.Repeat("a", 240) + "-" + strings.Repeat("b", 12)
	other := strings.Repeat("a", 240) + "-" + strings.Repeat("c", 12)
	p := joinPlan(bootstrapv1.Raw, "")
	x, y := mustRevision(t, long, p, ""), mustRevision(t, other, p, "")
	if len(x) > maxObjectName || len(y) > maxObjectName {
		t.Fatalf("names of %d and %d characters; a Secret's is at most %d", len(x), len(y), maxObjectName)
	}
	if x == y {
		t.Errorf("two configs cut short alike got the same revision %s", x)
	}
	if strings.Contains(x, "--") || !isRevisionOf(x, long) {
		t.Errorf("revision %s of %s", x, long)
	}
}
