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

package raw_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/raw"
)

// FuzzRender: arbitrary specs never panic, and every success is a stream of
// kubeadm documents (each with apiVersion and kind) plus, when present, a
// BootstrapFiles document.
func FuzzRender(f *testing.F) {
	plantest.AddFuzzSeeds(f, bootstrapv1.Raw)
	f.Fuzz(func(t *testing.T, data []byte, action uint8) {
		p, ok := plantest.FuzzPlan(data, action, bootstrapv1.Raw)
		if !ok {
			return
		}
		out, err := raw.Render(p)
		if err != nil {
			return
		}
		for _, doc := range strings.Split(strings.TrimPrefix(string(out.Value), "---\n"), "\n---\n") {
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || !strings.HasPrefix(meta.APIVersion, "kubeadm.k8s.io/") || meta.Kind == "" {
				t.Fatalf("not a kubeadm document (%v): %q", err, doc)
			}
		}
		if out.Files != nil {
			var files raw.FilesDocument
			if err := yaml.UnmarshalStrict(out.Files, &files); err != nil || files.Kind != raw.FilesKind {
				t.Fatalf("files document does not parse: %v", err)
			}
		}
	})
}
