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
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testenv"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// butaneDocExamples are the Butane documents of Butane's own documentation
// (the version this module builds with), retargeted to the Flatcar variant
// this provider takes: examples.md (written for Fedora CoreOS) and the
// Flatcar upgrade notes.
func butaneDocExamples(t *testing.T) map[string]string {
	t.Helper()
	dir := testenv.ModuleDir(t, "github.com/coreos/butane", "")
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
			for _, f := range want.Storage.Files {
				if got, ok := find(cfg.Storage.Files, func(x types.File) bool { return x.Path == f.Path }); !ok {
					t.Errorf("file %s missing", f.Path)
				} else if diff := cmp.Diff(f, got); diff != "" {
					t.Errorf("file %s changed (-butane +rendered):\n%s", f.Path, diff)
				}
			}
			for _, d := range want.Storage.Directories {
				if got, ok := find(cfg.Storage.Directories, func(x types.Directory) bool { return x.Path == d.Path }); !ok || !cmp.Equal(d, got) {
					t.Errorf("directory %s missing or changed", d.Path)
				}
			}
			for _, l := range want.Storage.Links {
				if got, ok := find(cfg.Storage.Links, func(x types.Link) bool { return x.Path == l.Path }); !ok || !cmp.Equal(l, got) {
					t.Errorf("link %s missing or changed", l.Path)
				}
			}
			for _, u := range want.Systemd.Units {
				if got, ok := find(cfg.Systemd.Units, func(x types.Unit) bool { return x.Name == u.Name }); !ok || !cmp.Equal(u, got) {
					t.Errorf("unit %s missing or changed", u.Name)
				}
			}
			for _, u := range want.Passwd.Users {
				if got, ok := find(cfg.Passwd.Users, func(x types.PasswdUser) bool { return x.Name == u.Name }); !ok || !cmp.Equal(u, got) {
					t.Errorf("user %s missing or changed", u.Name)
				}
			}
		})
	}
	t.Logf("%d of %d examples translate for Flatcar and were checked", translated, len(examples))
}

func find[T any](items []T, match func(T) bool) (T, bool) {
	for _, x := range items {
		if match(x) {
			return x, true
		}
	}
	var zero T
	return zero, false
}
