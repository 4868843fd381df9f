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

package ignition_test

import (
	"testing"

	ignconfig "github.com/coreos/ignition/v2/config/v3_4"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/ignition"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
)

// FuzzRender: arbitrary specs never panic, and every success is a config
// Ignition's own parser accepts without errors.
func FuzzRender(f *testing.F) {
	plantest.AddFuzzSeeds(f, bootstrapv1.Ignition)
	f.Fuzz(func(t *testing.T, data []byte, action uint8) {
		p, ok := plantest.FuzzPlan(data, action, bootstrapv1.Ignition)
		if !ok {
			return
		}
		out, err := ignition.Render(p)
		if err != nil {
			return
		}
		cfg, report, err := ignconfig.Parse(out)
		if err != nil || report.IsFatal() {
			t.Fatalf("output does not parse: %v %s", err, report.String())
		}
		if cfg.Ignition.Version != ignition.SpecVersion {
			t.Fatalf("version %s", cfg.Ignition.Version)
		}
	})
}
