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
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	butaneconfig "github.com/coreos/butane/config"
	butanecommon "github.com/coreos/butane/config/common"
	ignconfig "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/moduledir"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// butaneDocExamples are the Butane documents of Butane's own documentation
// (the version this module builds with), retargeted to the Flatcar variant
// this provider takes: examples.md (written for Fedora CoreOS) and the
// Flatcar upgrade notes.
func butaneDocExamples(t *testing.T) map[string]string {
	t.Helper()
	dir := moduledir.Of(t, "github.com/coreos/butane", "")
	out := map[string]string{}
	header := regexp.MustCompile(`(?m)^variant: \S+\nversion: \S+\n`)
	for _, doc := range []string{"docs/examples.md", "docs/upgrading-flatcar.md"} {
		b, err := os.ReadFile(filepath.Join(dir, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlock.FindAllStringSubmatch(string(b), -1) {
			if header.MatchString(m[1]) {
				out[filepath.Base(doc)+"#"+strconv.Itoa(i)] = header.ReplaceAllString(m[1], "variant: flatcar\nversion: 1.1.0\n")
			}
		}
	}
	return out
}

// TestButaneDocExamples: every example Butane itself translates for Flatcar
// is admitted here (or refused for undoing the bootstrap), and what Butane
// makes of it reaches the rendered config unchanged: each file, directory,
// link, unit and user of Butane's own translation is in the output as Butane
// wrote it.
func TestButaneDocExamples(t *testing.T) {
	examples := butaneDocExamples(t)
	if len(examples) < 20 {
		t.Fatalf("found %d examples in Butane's docs; the extraction no longer matches them", len(examples))
	}
	translated := 0
	gates := feature.NewFeatureGates()
	if err := gates.Set(string(feature.KubeadmBootstrapFormatIgnition) + "=true"); err != nil {
		t.Fatal(err)
	}
	for name, doc := range examples {
		t.Run(name, func(t *testing.T) {
			ref, _, err := butaneconfig.TranslateBytes([]byte(doc), butanecommon.TranslateBytesOptions{})
			if err != nil {
				t.Skipf("Butane itself does not translate it for Flatcar 1.1.0: %v", err)
			}
			want, _, err := ignconfig.Parse(ref)
			if err != nil {
				t.Fatal(err)
			}
			translated++
			spec := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
			spec.Ignition.Butane = bootstrapv1.ButaneConfig{AdditionalConfig: doc}
			if errs := fieldrules.Validate(spec, gates, field.NewPath("spec")); len(errs) > 0 {
				t.Fatalf("refused at admission: %v", errs.ToAggregate())
			}
			cfg, err := build(t, spec, plan.ActionJoin)
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			expectSame(t, "file", want.Storage.Files, cfg.Storage.Files, func(x types.File) string { return x.Path })
			expectSame(t, "directory", want.Storage.Directories, cfg.Storage.Directories, func(x types.Directory) string { return x.Path })
			expectSame(t, "link", want.Storage.Links, cfg.Storage.Links, func(x types.Link) string { return x.Path })
			expectSame(t, "unit", want.Systemd.Units, cfg.Systemd.Units, func(x types.Unit) string { return x.Name })
			expectSame(t, "user", want.Passwd.Users, cfg.Passwd.Users, func(x types.PasswdUser) string { return x.Name })
		})
	}
	t.Logf("%d of %d examples translate for Flatcar and were checked", translated, len(examples))
}

// expectSame checks that every item Butane produced is in the rendered
// config, found by key, exactly as Butane wrote it.
func expectSame[T any](t *testing.T, kind string, want, got []T, key func(T) string) {
	t.Helper()
	byKey := map[string]T{}
	for _, g := range got {
		byKey[key(g)] = g
	}
	for _, w := range want {
		g, ok := byKey[key(w)]
		if !ok {
			t.Errorf("%s %s missing", kind, key(w))
		} else if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s %s changed (-butane +rendered):\n%s", kind, key(w), diff)
		}
	}
}
