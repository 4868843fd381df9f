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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	upstreamv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstrapdata"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/moduledir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/webhooks/conversion"
)

// flatcarTemplates are real cluster templates that make Flatcar machines with
// format: ignition: Cluster API's own e2e data and infrastructure providers'
// released templates, read from their Go modules as `go mod download` gets them.
var flatcarTemplates = []struct {
	module, version string
	files           []string
}{
	{"sigs.k8s.io/cluster-api/test", "v1.14.2", []string{"e2e/data/infrastructure-docker/main/cluster-template-ignition/ignition.yaml"}},
	{"sigs.k8s.io/cluster-api-provider-aws/v2", "v2.13.0", []string{"templates/cluster-template-flatcar.yaml", "templates/cluster-template-flatcar-machinepool.yaml"}},
	{"sigs.k8s.io/cluster-api-provider-azure", "v1.21.0", []string{"templates/cluster-template-flatcar.yaml", "templates/cluster-template-flatcar-sysext.yaml"}},
	{"sigs.k8s.io/cluster-api-provider-openstack", "v0.13.0", []string{"templates/cluster-template-flatcar.yaml", "templates/cluster-template-flatcar-sysext.yaml"}},
	{"sigs.k8s.io/cluster-api-provider-vsphere", "v1.14.0", []string{"templates/cluster-template-ignition.yaml"}},
	{"github.com/ionos-cloud/cluster-api-provider-proxmox", "v0.7.0", []string{"templates/cluster-template-flatcar.yaml"}},
}

// templateSpec is one KubeadmConfigSpec found in a template.
type templateSpec struct {
	name    string // kind/name in the template
	spec    *bootstrapv1.KubeadmConfigSpec
	actions []plan.Action
}

// clusterctlValue gives each variable a value of the kind the name asks for.
func clusterctlValue(name string) (string, error) {
	switch {
	case strings.HasSuffix(name, "_COUNT"):
		return "1", nil
	case strings.HasSuffix(name, "KUBERNETES_VERSION"):
		return "v1.34.1", nil
	case strings.HasSuffix(name, "_B64"):
		return "eA==", nil
	case strings.HasSuffix(name, "_IP") || strings.HasSuffix(name, "GATEWAY"):
		return "10.0.0.1", nil
	case strings.HasSuffix(name, "_PORT"):
		return "6443", nil
	}
	return "value-" + strings.ToLower(strings.ReplaceAll(name, "_", "-")), nil
}

// specsOf substitutes a template's variables with clusterctl's own processor
// and returns its kubeadm specs as this provider's v1beta2 (v1beta1 ones
// through the conversion webhook's code).
func specsOf(t *testing.T, path string) []templateSpec {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	processor := yamlprocessor.NewSimpleProcessor()
	defaults, err := processor.GetVariableMap(raw)
	if err != nil {
		t.Fatal(err)
	}
	text, err := processor.Process(raw, func(name string) (string, error) {
		if defaults[name] != nil {
			return "", fmt.Errorf("unset: use the template's default") // as clusterctl with the variable unset
		}
		return clusterctlValue(name)
	})
	if err != nil {
		t.Fatalf("clusterctl's variable processor: %v", err)
	}
	var out []templateSpec
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(text)))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec map[string]any `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%v", err)
		}
		var spec any
		var actions []plan.Action
		switch obj.Kind {
		case "KubeadmControlPlane":
			spec, actions = obj.Spec["kubeadmConfigSpec"], []plan.Action{plan.ActionInit, plan.ActionJoinControlPlane}
		case "KubeadmConfigTemplate":
			spec, actions = obj.Spec["template"].(map[string]any)["spec"], []plan.Action{plan.ActionJoin}
		case "KubeadmConfig":
			spec, actions = obj.Spec, []plan.Action{plan.ActionJoin}
		default:
			continue
		}
		version := obj.APIVersion[strings.LastIndex(obj.APIVersion, "/")+1:]
		specJSON, err := json.Marshal(map[string]any{"apiVersion": "bootstrap.cluster.x-k8s.io/" + version, "kind": "KubeadmConfig", "spec": spec})
		if err != nil {
			t.Fatal(err)
		}
		cfg := &bootstrapv1.KubeadmConfig{}
		switch version {
		case "v1beta1":
			old := &upstreamv1beta1.KubeadmConfig{}
			if err := yaml.UnmarshalStrict(specJSON, old); err != nil {
				t.Fatalf("%s/%s: %v", obj.Kind, obj.Metadata.Name, err)
			}
			if err := conversion.ConvertKubeadmConfigV1Beta1ToHub(context.Background(), old, cfg); err != nil {
				t.Fatal(err)
			}
		case "v1beta2":
			if err := yaml.UnmarshalStrict(specJSON, cfg); err != nil {
				t.Fatalf("%s/%s: %v", obj.Kind, obj.Metadata.Name, err)
			}
		default:
			t.Fatalf("%s/%s: apiVersion %s", obj.Kind, obj.Metadata.Name, obj.APIVersion)
		}
		out = append(out, templateSpec{name: obj.Kind + "/" + obj.Metadata.Name, spec: &cfg.Spec, actions: actions})
	}
	return out
}

// envReference is what the templates' own preKubeadmCommands fill on the
// machine (envsubst over /etc/kubeadm.yml with Afterburn's variables, sed on
// @@HOSTNAME@@); kubeadm's validation runs after the same substitution.
var envReference = regexp.MustCompile(`\$\{[A-Za-z0-9_]+(%[^}]*)?\}|@@[A-Z_]+@@`)

// expectedRefusals are the templates' parts admission refuses, each with why.
// Everything else must be admitted and render.
var expectedRefusals = map[string]string{}

// expectedIgnitionWarnings are what Ignition's validator says about a
// template's output that the template asks for itself, by name prefix.
var expectedIgnitionWarnings = map[string]string{
	// Its Container Linux Config partitions the etcd disk and its diskSetup
	// formats the whole disk: upstream's output does the same on the machine.
	"sigs.k8s.io/cluster-api-provider-azure/templates/cluster-template-flatcar": "filesystem overwrites partitioned device",
}

func onlyExpectedWarnings(name string, err error) bool {
	for prefix, want := range expectedIgnitionWarnings {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if (strings.HasPrefix(line, "warning at") && !strings.Contains(line, want)) || strings.HasPrefix(line, "error at") {
				return false
			}
		}
		return strings.Contains(err.Error(), want)
	}
	return false
}

// TestRealFlatcarTemplates admits and renders every Flatcar KubeadmConfigSpec
// of the templates above, which upstream's renderer renders (checked): Ignition's validator
// accepts the output and kubeadm its configuration. A refusal must be one
// listed, with its reason, in expectedRefusals.
func TestRealFlatcarTemplates(t *testing.T) {
	gates := allGatesOn(t)
	for _, src := range flatcarTemplates {
		dir := moduledir.Of(t, src.module, src.version)
		for _, file := range src.files {
			for _, ts := range specsOf(t, filepath.Join(dir, file)) {
				name := src.module + "/" + file + ": " + ts.name
				t.Run(name, func(t *testing.T) {
					if ts.spec.Format != bootstrapv1.Ignition {
						t.Fatalf("format %q: not a Flatcar spec", ts.spec.Format)
					}
					warnings, admitted := admit(t, ts.spec, gates, expectedRefusals[name])
					for _, w := range warnings {
						t.Logf("admission warning: %s", w)
					}
					if !admitted {
						return
					}
					for _, action := range ts.actions {
						in := plantest.Input(ts.spec, action)
						// Files from secrets (Azure's cloud provider config) get a stand-in.
						in.ReadSecret = func(ref plan.SecretRef) ([]byte, error) { return []byte("from secret " + ref.Name + "\n"), nil }
						p, err := plan.Build(in)
						if err != nil {
							t.Fatalf("%s: %v", action, err)
						}
						// Upstream v1.14.2 renders it: this is a spec upstream's users run.
						if _, err := upstreamIgnitionWithCLC(p, in); err != nil {
							t.Fatalf("%s: upstream's renderer refuses it too: %v", action, err)
						}
						d, err := bootstrapdata.Render(p)
						if err != nil {
							t.Fatalf("%s: %v", action, err)
						}
						if err := consumers.Ignition(d.Value); err != nil && !onlyExpectedWarnings(name, err) {
							t.Fatalf("%s: %v", action, err)
						}
						_, config, err := consumers.KubeadmConfigIn("ignition", d.Value)
						if err != nil {
							t.Fatal(err)
						}
						if err := consumers.Kubeadm(envReference.ReplaceAll(config, []byte("node-a"))); err != nil {
							t.Fatalf("%s: %v", action, err)
						}
					}
				})
			}
		}
	}
}

// admit runs admission on spec: with refusal set, it must refuse saying so
// (admitted is false); otherwise it must admit, and returns the warnings.
func admit(t *testing.T, spec *bootstrapv1.KubeadmConfigSpec, gates featuregate.FeatureGate, refusal string) (warnings []string, admitted bool) {
	t.Helper()
	errs, warnings := fieldrules.ValidateWithWarnings(spec, gates, field.NewPath("spec"))
	switch {
	case refusal != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), refusal)):
		t.Fatalf("want a refusal saying %q, got %v", refusal, errs.ToAggregate())
	case refusal == "" && len(errs) > 0:
		t.Fatalf("refused at admission: %v", errs.ToAggregate())
	}
	return warnings, refusal == ""
}

// upstreamCLCInputs are the Container Linux Configs of upstream Cluster API's
// own tests of its Ignition renderer (pkg/ignition and pkg/ignition/clc,
// v1.14.2): the constants named config* and every additionalConfig written
// with fmt.Sprintf, read from the Go source with go/parser.
func upstreamCLCInputs(t *testing.T) map[string]string {
	t.Helper()
	dir := moduledir.Of(t, "sigs.k8s.io/cluster-api", "v1.14.2")
	out := map[string]string{}
	for _, file := range []string{"bootstrap/kubeadm/pkg/ignition/ignition_test.go", "bootstrap/kubeadm/pkg/ignition/clc/clc_test.go"} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(dir, file), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		literal := func(e ast.Expr) (string, bool) {
			if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, err := strconv.Unquote(lit.Value)
				return s, err == nil
			}
			return "", false
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.ValueSpec:
				for i, id := range x.Names {
					if i < len(x.Values) && strings.HasPrefix(id.Name, "config") {
						if s, ok := literal(x.Values[i]); ok {
							out[fmt.Sprintf("%s:%s", filepath.Base(file), id.Name)] = s
						}
					}
				}
			case *ast.KeyValueExpr:
				if key, ok := x.Key.(*ast.Ident); ok && key.Name == "AdditionalConfig" {
					if call, ok := x.Value.(*ast.CallExpr); ok && len(call.Args) > 0 {
						if s, ok := literal(call.Args[0]); ok {
							out[fmt.Sprintf("%s:%d", filepath.Base(file), fset.Position(x.Pos()).Line)] = fmt.Sprintf(s, "test-string")
						}
					}
				}
			}
			return true
		})
	}
	if len(out) < 4 {
		t.Fatalf("found %d Container Linux Configs in upstream's tests; the extraction no longer matches them", len(out))
	}
	return out
}

// upstreamCLCRefusals are the upstream test inputs refused here, with why.
var upstreamCLCRefusals = map[string]string{
	// Ignition 2.3 warns and sgdisk truncates the label; Ignition 3 refuses it.
	"clc_test.go:configWithIgnitionWarning": "cannot be expressed as Ignition 3, which current Flatcar reads: error at $.storage.disks.0.partitions.0.label: partition label will be truncated to text before the colon",
}

// TestUpstreamCLCTestInputs: every Container Linux Config upstream's tests
// render (with warnings) is admitted here with its warnings as admission
// warnings, renders to a valid Ignition config, and is refused under strict.
func TestUpstreamCLCTestInputs(t *testing.T) {
	gates := allGatesOn(t)
	for name, clc := range upstreamCLCInputs(t) {
		t.Run(name, func(t *testing.T) {
			spec := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
			spec.Ignition.ContainerLinuxConfig = upstreambootstrapv1.ContainerLinuxConfig{AdditionalConfig: clc}
			in := plantest.Input(spec, plan.ActionJoin)
			p, err := plan.Build(in)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := upstreamIgnitionWithCLC(p, in); err != nil {
				t.Fatalf("upstream's renderer refuses its own test input: %v", err)
			}
			warnings, admitted := admit(t, spec, gates, upstreamCLCRefusals[name])
			if !admitted {
				return
			}
			_, d := render(t, spec, plan.ActionJoin)
			if err := consumers.Ignition(d.Value); err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 {
				spec.Ignition.ContainerLinuxConfig.Strict = ptr.To(true)
				if errs, _ := fieldrules.ValidateWithWarnings(spec, gates, field.NewPath("spec")); len(errs) == 0 {
					t.Errorf("warned (%v) but admitted under strict", warnings)
				}
			}
			t.Logf("warnings: %v", warnings)
		})
	}
}
