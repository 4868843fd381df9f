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

package v1beta2_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// upstreamModuleDir returns where the Go module cache holds the
// sigs.k8s.io/cluster-api version this module builds against.
func upstreamModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		t.Fatalf("locating upstream cluster-api in the module cache: %v", err)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("unexpected `go mod download` output %q: %v", out, err)
	}
	if mod.Version != "v1.14.2" {
		t.Fatalf("this compatibility check is pinned to upstream v1.14.2, go.mod has %s", mod.Version)
	}
	return mod.Dir
}

func loadSchema(t *testing.T, path, version string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Fatalf("%s: version %s has no schema", path, version)
			}
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("%s: no version %s", path, version)
	return nil
}

// facets is everything about a schema node that decides what the API server
// accepts, without the node's children and documentation.
func facets(s *apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	f := *s.DeepCopy()
	f.Description = ""
	f.Properties = nil
	f.Items = nil
	if f.AdditionalProperties != nil {
		f.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: f.AdditionalProperties.Allows}
	}
	return f
}

// flatten maps every property path of a schema to its node.
// Paths use "." between properties, "[]" for array items and "{}" for map values.
func flatten(prefix string, s *apiextensionsv1.JSONSchemaProps, out map[string]*apiextensionsv1.JSONSchemaProps) {
	out[prefix] = s
	for name := range s.Properties {
		child := s.Properties[name]
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		flatten(p, &child, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		flatten(prefix+"[]", s.Items.Schema, out)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		flatten(prefix+"{}", s.AdditionalProperties.Schema, out)
	}
}

// asJSON is v as JSON for a message, or why it is not.
func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func enumValues(s apiextensionsv1.JSONSchemaProps) []string {
	var vals []string
	for _, e := range s.Enum {
		vals = append(vals, string(e.Raw))
	}
	sort.Strings(vals)
	return vals
}

// compareToUpstream returns every difference between ours and upstream's schema
// other than the documented additions: `raw` in the format enum, the
// ignition.butane subtree and gzipUserData.
func compareToUpstream(upstream, ours *apiextensionsv1.JSONSchemaProps, specPath string) []string {
	up, our := map[string]*apiextensionsv1.JSONSchemaProps{}, map[string]*apiextensionsv1.JSONSchemaProps{}
	flatten("", upstream, up)
	flatten("", ours, our)
	formatPath := specPath + ".format"
	butanePath := specPath + ".ignition.butane"
	gzipPath := specPath + ".gzipUserData"

	var problems []string
	for path, u := range up {
		o, ok := our[path]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: upstream property missing", path))
			continue
		}
		uf, of := facets(u), facets(o)
		if path == formatPath {
			ue, oe := enumValues(uf), enumValues(of)
			want := append(append([]string{}, ue...), `"raw"`)
			sort.Strings(want)
			if !reflect.DeepEqual(oe, want) {
				problems = append(problems, fmt.Sprintf("%s: enum %v, want upstream's %v plus \"raw\"", path, oe, ue))
			}
			uf.Enum, of.Enum = nil, nil
		}
		if !reflect.DeepEqual(uf, of) {
			problems = append(problems, fmt.Sprintf("%s: differs\n  upstream: %s\n  ours:     %s", path, asJSON(uf), asJSON(of)))
		}
	}
	for path := range our {
		if _, ok := up[path]; ok {
			continue
		}
		if path == butanePath || strings.HasPrefix(path, butanePath+".") || path == gzipPath {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: not in upstream and not a documented addition", path))
	}
	for _, added := range []string{butanePath, gzipPath} {
		if _, ok := our[added]; !ok {
			problems = append(problems, added+": missing")
		}
	}
	sort.Strings(problems)
	return problems
}

func TestCRDsAreASupersetOfUpstreamV1Beta2(t *testing.T) {
	upstreamBases := filepath.Join(upstreamModuleDir(t), "bootstrap", "kubeadm", "config", "crd", "bases")
	for _, tc := range []struct {
		file     string
		specPath string
	}{
		{"bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml", "spec"},
		{"bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml", "spec.template.spec"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			upstream := loadSchema(t, filepath.Join(upstreamBases, tc.file), "v1beta2")
			ours := loadSchema(t, filepath.Join(testenv.CRDDir(), tc.file), "v1beta2")

			up := map[string]*apiextensionsv1.JSONSchemaProps{}
			flatten("", upstream, up)
			if len(up) < 300 {
				t.Fatalf("upstream schema has only %d property paths: the walk is broken", len(up))
			}
			for _, p := range compareToUpstream(upstream, ours, tc.specPath) {
				t.Error(p)
			}
		})
	}
}

// The comparison itself must catch a dropped field, a changed type and an
// undocumented addition; otherwise a green run proves nothing.
func TestCompareToUpstreamDetectsDrift(t *testing.T) {
	upstream := loadSchema(t, filepath.Join(upstreamModuleDir(t), "bootstrap", "kubeadm", "config", "crd", "bases", "bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml"), "v1beta2")
	good := loadSchema(t, filepath.Join(testenv.CRDDir(), "bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml"), "v1beta2")
	if p := compareToUpstream(upstream, good, "spec"); len(p) != 0 {
		t.Fatalf("baseline differs: %v", p)
	}

	mutate := func(name string, f func(spec *apiextensionsv1.JSONSchemaProps), want string) {
		t.Run(name, func(t *testing.T) {
			ours := good.DeepCopy()
			spec := ours.Properties["spec"]
			f(&spec)
			ours.Properties["spec"] = spec
			problems := compareToUpstream(upstream, ours, "spec")
			if !strings.Contains(strings.Join(problems, "\n"), want) {
				t.Fatalf("expected a problem mentioning %q, got %v", want, problems)
			}
		})
	}
	mutate("dropped field", func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "bootCommands") }, "spec.bootCommands: upstream property missing")
	mutate("changed type", func(s *apiextensionsv1.JSONSchemaProps) {
		v := s.Properties["verbosity"]
		v.Type = "string"
		s.Properties["verbosity"] = v
	}, "spec.verbosity: differs")
	mutate("undocumented addition", func(s *apiextensionsv1.JSONSchemaProps) {
		s.Properties["extra"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}, "spec.extra: not in upstream")
	mutate("format enum without raw", func(s *apiextensionsv1.JSONSchemaProps) {
		f := s.Properties["format"]
		f.Enum = f.Enum[:2]
		s.Properties["format"] = f
	}, "spec.format: enum")
}

func loadVersion(t *testing.T, path, version string) apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v
		}
	}
	t.Fatalf("%s: no version %s", path, version)
	return apiextensionsv1.CustomResourceDefinitionVersion{}
}

// v1beta1 is served exactly as upstream serves it (schema, deprecation,
// columns, status subresource), not stored; v1beta2 stays the storage version.
func TestV1Beta1IsServedAsUpstream(t *testing.T) {
	upstreamBases := filepath.Join(upstreamModuleDir(t), "bootstrap", "kubeadm", "config", "crd", "bases")
	for _, file := range []string{"bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml", "bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml"} {
		t.Run(file, func(t *testing.T) {
			upstream := loadVersion(t, filepath.Join(upstreamBases, file), "v1beta1")
			ours := loadVersion(t, filepath.Join(testenv.CRDDir(), file), "v1beta1")
			if !ours.Served || ours.Storage || !ours.Deprecated {
				t.Errorf("v1beta1 served=%v storage=%v deprecated=%v: want served, not stored, deprecated", ours.Served, ours.Storage, ours.Deprecated)
			}
			if !reflect.DeepEqual(upstream, ours) {
				uj, _ := json.Marshal(upstream)
				oj, _ := json.Marshal(ours)
				t.Errorf("v1beta1 differs from upstream's (%d vs %d bytes of JSON)", len(uj), len(oj))
			}
			if v2 := loadVersion(t, filepath.Join(testenv.CRDDir(), file), "v1beta2"); !v2.Storage || !v2.Served {
				t.Errorf("v1beta2 served=%v storage=%v: want the served storage version", v2.Served, v2.Storage)
			}
		})
	}
}
