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

package bootstrapdata_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	"sigs.k8s.io/yaml"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstrapdata"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/ignition"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/raw"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current renderers")

type goldenCase struct {
	name   string
	format bootstrapv1.Format
	action plan.Action
	spec   *bootstrapv1.KubeadmConfigSpec
}

func goldenCases() []goldenCase {
	var cases []goldenCase
	for _, format := range bootstrapv1.Formats {
		for _, action := range plan.Actions {
			cases = append(cases, goldenCase{fmt.Sprintf("%s-%s-minimal", format, action), format, action, plantest.Base(format, action)})
			if format != bootstrapv1.Raw {
				cases = append(cases, goldenCase{fmt.Sprintf("%s-%s-full", format, action), format, action, plantest.Full(format, action)})
			}
		}
		for _, f := range plantest.Features {
			for _, action := range []plan.Action{plan.ActionJoin, plan.ActionJoinControlPlane} {
				if !f.Applies(format, action) || (action == plan.ActionJoinControlPlane && f.Name != "file-discovery") {
					continue
				}
				s := plantest.Base(format, action)
				f.Apply(s)
				cases = append(cases, goldenCase{fmt.Sprintf("%s-%s-%s", format, action, f.Name), format, action, s})
			}
		}
	}
	return cases
}

func allGatesOn(t testing.TB) featuregate.FeatureGate {
	gates := feature.NewFeatureGates()
	if err := gates.SetFromMap(map[string]bool{string(feature.KubeadmBootstrapFormatIgnition): true, string(feature.KubeadmBootstrapFormatRaw): true}); err != nil {
		t.Fatal(err)
	}
	return gates
}

func render(t testing.TB, spec *bootstrapv1.KubeadmConfigSpec, action plan.Action) (*plan.Plan, *bootstrapdata.Data) {
	t.Helper()
	p, err := plan.Build(plantest.Input(spec, action))
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	d, err := bootstrapdata.Render(p)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return p, d
}

// parse turns one data secret key into a structure to compare: YAML and
// JSON documents are decoded, so formatting differences do not matter.
func parse(t testing.TB, format bootstrapv1.Format, key string, b []byte) any {
	t.Helper()
	var docs []any
	text := string(b)
	switch {
	case key == bootstrapdata.ValueKey && format == bootstrapv1.Ignition:
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("ignition output is not JSON: %v", err)
		}
		return v
	case key == bootstrapdata.ValueKey && format == bootstrapv1.CloudConfig:
		header, body, _ := strings.Cut(text, "#cloud-config\n")
		docs = append(docs, header+"#cloud-config")
		text = body
	case key == bootstrapdata.FormatKey:
		return text
	}
	for _, doc := range strings.Split(text, "\n---\n") {
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatalf("%s %s is not YAML: %v", format, key, err)
		}
		if v != nil {
			docs = append(docs, v)
		}
	}
	return docs
}

// kubeadmConfigIn extracts the kubeadm configuration a format delivers, so it
// can be checked against the plan and by kubeadm itself; it must be written
// where the format's kubeadm command reads it.
func kubeadmConfigIn(t testing.TB, p *plan.Plan, d *bootstrapdata.Data) []byte {
	t.Helper()
	path, config, err := consumers.KubeadmConfigIn(string(d.Format), d.Value)
	if err != nil {
		t.Fatal(err)
	}
	want := map[bootstrapv1.Format]string{bootstrapv1.Raw: "", bootstrapv1.CloudConfig: p.DefaultConfigPath(), bootstrapv1.Ignition: ignition.ConfigPath}[d.Format]
	if path != want {
		t.Errorf("%s output writes the kubeadm configuration to %q, want %q", d.Format, path, want)
	}
	return config
}

// checkWithRealValidators runs the consumers' validators over the output.
func checkWithRealValidators(t testing.TB, p *plan.Plan, d *bootstrapdata.Data) {
	t.Helper()
	switch d.Format {
	case bootstrapv1.CloudConfig:
		if err := consumers.CloudInit(d.Value); err != nil {
			t.Error(err)
		}
	case bootstrapv1.Ignition:
		if err := consumers.Ignition(d.Value); err != nil {
			t.Error(err)
		}
	}
	writeDiscoveryFiles(t, p)
	kubeadmConfig := kubeadmConfigIn(t, p, d)
	if string(kubeadmConfig) != p.Kubeadm.ConfigYAML() {
		t.Errorf("the %s output does not carry the plan's kubeadm configuration unchanged", d.Format)
	}
	if err := consumers.Kubeadm(kubeadmConfig); err != nil {
		t.Error(err)
	}
}

// writeDiscoveryFiles writes the discovery kubeconfig where the plan puts
// it: the machine writes it before kubeadm runs, and kubeadm's validation
// looks for it on disk.
func writeDiscoveryFiles(t testing.TB, p *plan.Plan) {
	t.Helper()
	for _, f := range p.Files {
		if f.Kind == plan.FileDiscoveryKubeconfig {
			if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
				t.Fatal(err)
			}
			// Parallel cases write the same file: write aside, then rename.
			tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".discovery-")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tmp.WriteString(f.Content); err != nil {
				t.Fatal(err)
			}
			if err := tmp.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp.Name(), f.Path); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestGolden(t *testing.T) {
	gates := allGatesOn(t)
	dir := filepath.Join("testdata", "golden")
	seen := map[string]bool{}
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if errs := fieldrules.Validate(tc.spec, gates, field.NewPath("spec")); len(errs) > 0 {
				t.Fatalf("the case's spec fails admission: %v", errs.ToAggregate())
			}
			p, d := render(t, tc.spec, tc.action)
			for key, got := range d.SecretData() {
				file := filepath.Join(dir, tc.name+"."+key)
				if *update {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(file, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("missing golden file (run go test -update): %v", err)
				}
				if diff := cmp.Diff(parse(t, tc.format, key, want), parse(t, tc.format, key, got)); diff != "" {
					t.Errorf("%s differs from %s (-want +got):\n%s", key, file, diff)
				}
			}
			checkWithRealValidators(t, p, d)
		})
		seen[tc.name] = true
	}
	// Every golden file belongs to a case, so removed cases leave nothing stale.
	if !*update {
		entries, _ := os.ReadDir(dir)
		var stale []string
		for _, e := range entries {
			if name := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())); !seen[name] {
				stale = append(stale, e.Name())
			}
		}
		sort.Strings(stale)
		if len(stale) > 0 {
			t.Errorf("golden files without a case: %v", stale)
		}
	}
}

// TestCorpusPassesRealValidators renders a seeded corpus of generated specs in
// every format and action and has the real consumers validate each output.
func TestCorpusPassesRealValidators(t *testing.T) {
	const perFormatAndAction = 24 // 3 formats x 3 actions x 24 = 216 specs
	gates := allGatesOn(t)
	r := rand.New(rand.NewPCG(42, 2026))
	n := 0
	for _, format := range bootstrapv1.Formats {
		for _, action := range plan.Actions {
			for i := range perFormatAndAction {
				spec := plantest.Random(r, format, action)
				name := fmt.Sprintf("%s-%s-%03d", format, action, i)
				n++
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					if errs := fieldrules.Validate(spec, gates, field.NewPath("spec")); len(errs) > 0 {
						t.Fatalf("generated spec fails admission: %v", errs.ToAggregate())
					}
					p, d := render(t, spec, action)
					checkWithRealValidators(t, p, d)
				})
			}
		}
	}
	if n < 200 {
		t.Fatalf("corpus has %d specs, want at least 200", n)
	}
}

func TestRawFilesDocument(t *testing.T) {
	for _, action := range plan.Actions {
		_, d := render(t, plantest.Base(bootstrapv1.Raw, action), action)
		files, ok := d.Extra[raw.FilesKey]
		if action == plan.ActionJoin {
			if ok {
				t.Errorf("a worker join needs no files, got %s", files)
			}
			continue
		}
		var doc raw.FilesDocument
		if err := yaml.UnmarshalStrict(files, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Kind != raw.FilesKind || doc.APIVersion != raw.FilesAPIVersion || string(doc.Action) != string(action) {
			t.Errorf("unexpected header %+v", doc)
		}
		paths := map[string]bool{}
		for _, f := range doc.Files {
			paths[f.Path] = true
		}
		for _, want := range []string{"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key", "/etc/kubernetes/pki/etcd/ca.key", "/etc/kubernetes/pki/front-proxy-ca.key", "/etc/kubernetes/pki/sa.key", "/etc/kubernetes/pki/sa.pub"} {
			if !paths[want] {
				t.Errorf("%s: files document lacks %s", action, want)
			}
		}
	}
}
