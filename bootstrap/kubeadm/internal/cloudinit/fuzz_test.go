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

package cloudinit_test

import (
	"bytes"
	"testing"

	"sigs.k8s.io/yaml"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/cloudinit"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
)

// FuzzRender: arbitrary specs never panic, and every success is a
// #cloud-config document that parses back to the structure it was built from.
func FuzzRender(f *testing.F) {
	plantest.AddFuzzSeeds(f, bootstrapv1.CloudConfig)
	f.Fuzz(func(t *testing.T, data []byte, action uint8) {
		p, ok := plantest.FuzzPlan(data, action, bootstrapv1.CloudConfig)
		if !ok {
			return
		}
		out, err := cloudinit.Render(p)
		if err != nil {
			return
		}
		body, found := bytes.CutPrefix(out, []byte(cloudinit.Header))
		if !found {
			t.Fatalf("output lacks the header: %q", out[:min(len(out), 40)])
		}
		if bytes.Contains(body, []byte("{{")) || bytes.Contains(body, []byte("{%")) || bytes.Contains(body, []byte("{#")) {
			// cloud-init's Jinja reads this text before YAML does; what it
			// makes of it is TestCloudInitLoadsExactlyWhatThePlanHolds's and
			// TestJinjaAsUpstreamWhereMeant's to check, with cloud-init itself.
			return
		}
		var parsed cloudinit.Config
		if err := yaml.UnmarshalStrict(body, &parsed); err != nil {
			t.Fatalf("output does not parse: %v", err)
		}
		want, err := cloudinit.Build(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(parsed.WriteFiles) != len(want.WriteFiles) || len(parsed.RunCmd) != len(want.RunCmd) {
			t.Fatalf("parsed output lost entries: %d/%d files, %d/%d commands", len(parsed.WriteFiles), len(want.WriteFiles), len(parsed.RunCmd), len(want.RunCmd))
		}
		for i := range want.WriteFiles {
			if parsed.WriteFiles[i].Content != want.WriteFiles[i].Content || parsed.WriteFiles[i].Path != want.WriteFiles[i].Path {
				t.Fatalf("write_files[%d] did not survive marshalling", i)
			}
		}
	})
}
