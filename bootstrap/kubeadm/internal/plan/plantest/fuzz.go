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

package plantest

import (
	"encoding/json"
	"testing"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
)

// AddFuzzSeeds seeds a renderer fuzz target with every feature spec of format,
// as JSON, for every action.
func AddFuzzSeeds(f *testing.F, format bootstrapv1.Format) {
	for i, action := range plan.Actions {
		specs := []*bootstrapv1.KubeadmConfigSpec{Base(format, action), Full(format, action)}
		for _, feat := range Features {
			s := Base(format, action)
			feat.Apply(s)
			specs = append(specs, s)
		}
		for _, s := range specs {
			b, err := json.Marshal(s)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, uint8(i))
		}
	}
}

// FuzzPlan turns fuzz input into a plan for format: data is a JSON spec,
// action picks the kubeadm action. ok is false when the input is not a spec
// or the plan refuses it (an error, which is allowed; a panic is not).
func FuzzPlan(data []byte, action uint8, format bootstrapv1.Format) (p *plan.Plan, ok bool) {
	var spec bootstrapv1.KubeadmConfigSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, false
	}
	spec.Format = format
	a := plan.Actions[int(action)%len(plan.Actions)]
	p, err := plan.Build(Input(&spec, a))
	return p, err == nil
}
