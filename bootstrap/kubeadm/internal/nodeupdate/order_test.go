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

package nodeupdate

import (
	"encoding/json"
	"testing"

	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
)

func joinedPlan(t *testing.T, format bootstrapv1.Format, action plan.Action, content string) *plan.Plan {
	t.Helper()
	in := plantest.Input(plantest.Base(format, action), action)
	// A kubeadm patch: a file every format carries, raw too.
	in.Spec.JoinConfiguration.Patches.Directory = "/etc/kubeadm/patches"
	in.Spec.Files = []upstreambootstrapv1.File{{Path: "/etc/kubeadm/patches/kubeletconfiguration0+merge.yaml", Content: content}}
	in.Joined = true
	p, err := plan.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOrderIsTheSameInEveryFormat: the NodeUpdate of a spec does not depend
// on the format; its digest names its content and is what the document says.
func TestOrderIsTheSameInEveryFormat(t *testing.T) {
	var digest string
	for _, format := range bootstrapv1.Formats {
		u, doc, err := Order(joinedPlan(t, format, plan.ActionJoinControlPlane, "a"), "")
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if digest != "" && u.Digest != digest {
			t.Errorf("%s: digest %s, another format's %s", format, u.Digest, digest)
		}
		digest = u.Digest
		var read rawv1.NodeUpdate
		if err := json.Unmarshal(doc, &read); err != nil || read.Digest != u.Digest || !read.ControlPlane || string(read.Files[0].Content) != "a" {
			t.Errorf("%s: document %s (%v)", format, doc, err)
		}
	}
	other, _, err := Order(joinedPlan(t, bootstrapv1.CloudConfig, plan.ActionJoinControlPlane, "b"), "")
	if err != nil || other.Digest == digest {
		t.Errorf("another file content kept the digest %s (%v)", digest, err)
	}
	worker, _, err := Order(joinedPlan(t, bootstrapv1.CloudConfig, plan.ActionJoin, "a"), "")
	if err != nil || worker.ControlPlane || worker.Digest == digest {
		t.Errorf("a worker's update: %+v (%v)", worker, err)
	}
	sourced, _, err := Order(joinedPlan(t, bootstrapv1.CloudConfig, plan.ActionJoinControlPlane, "a"), "https://dl.k8s.io/release")
	if err != nil || sourced.Binaries == nil || sourced.Binaries.URL != "https://dl.k8s.io/release" || sourced.Digest == digest {
		t.Errorf("an update with a binaries source: %+v (%v)", sourced, err)
	}
}

// TestTemplatedKubeletFlags: a kubelet flag whose value holds Jinja is
// marked, and its supported placeholders declared once.
func TestTemplatedKubeletFlags(t *testing.T) {
	in := plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin), plan.ActionJoin)
	id := "{{ ds.meta_data.instance_id }}"
	in.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs = []upstreambootstrapv1.Arg{
		{Name: "provider-id", Value: ptr.To("sim://" + id)}, {Name: "node-labels", Value: ptr.To("id=" + id)}, {Name: "v", Value: ptr.To("2")},
	}
	in.Joined = true
	p, err := plan.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	u, _, err := Order(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if !u.KubeletExtraArgs[0].Templated || !u.KubeletExtraArgs[1].Templated || u.KubeletExtraArgs[2].Templated {
		t.Errorf("templated flags: %+v", u.KubeletExtraArgs)
	}
	if len(u.Placeholders) != 1 || u.Placeholders[0] != (rawv1.Placeholder{Text: id, Metadata: rawv1.MetadataInstanceID}) {
		t.Errorf("placeholders: %+v", u.Placeholders)
	}
}
