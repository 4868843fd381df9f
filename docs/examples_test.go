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

package docs_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
)

var (
	// topLevelKey is a YAML document's first key at the top level.
	topLevelKey = regexp.MustCompile(`(?m)^([A-Za-z]+):`)
	// yamlFence is a YAML block, also one indented in a list item.
	yamlFence = regexp.MustCompile("(?ms)^( *)```yaml\n(.*?)^ *```")
)

// TestObjectExamplesDecode: every YAML example of the docs that is a
// Kubernetes object says its apiVersion and kind, decodes into Cluster API's
// or this provider's type without an unknown or mistyped field, and, for
// this provider's kinds, passes admission's field checks (both gated
// formats on). An example that starts at spec cannot be checked and is
// refused.
func TestObjectExamplesDecode(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clusterv1.AddToScheme, controlplanev1.AddToScheme, bootstrapv1.AddToScheme, clusterctlv1.AddToScheme, runtimev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	checked := 0
	for _, page := range markdownFiles(t) {
		text := read(t, page)
		for _, m := range yamlFence.FindAllStringSubmatchIndex(text, -1) {
			line := strings.Count(text[:m[0]], "\n") + 1
			body := dedent(text[m[4]:m[5]], m[3]-m[2])
			for _, doc := range strings.Split(body, "\n---\n") {
				at := fmt.Sprintf("%s:%d", page, line)
				if err := checkExample(scheme, doc); err != nil {
					t.Errorf("%s: %v", at, err)
				}
				if strings.Contains(doc, "\nkind:") || strings.HasPrefix(doc, "apiVersion:") {
					checked++
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no object example found")
	}
}

// dedent removes a block's indentation of n spaces from each line.
func dedent(block string, n int) string {
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, strings.Repeat(" ", n))
	}
	return strings.Join(lines, "\n")
}

// checkExample decodes one YAML document of an example.
func checkExample(scheme *runtime.Scheme, doc string) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	if meta.APIVersion == "" || meta.Kind == "" {
		if k := topLevelKey.FindStringSubmatch(doc); k != nil && (k[1] == "spec" || k[1] == "metadata") {
			return fmt.Errorf("an object example starts at %s: give it its apiVersion and kind so that it can be checked", k[1])
		}
		return nil // a fragment that is not an object (clusterctl settings, a list of patches)
	}
	var obj any
	switch {
	case meta.APIVersion == rawv1.GroupVersion && meta.Kind == rawv1.FilesKind:
		obj = &rawv1.BootstrapFiles{}
	case meta.APIVersion == rawv1.GroupVersion && meta.Kind == rawv1.NodeUpdateKind:
		obj = &rawv1.NodeUpdate{}
	default:
		gv, err := schema.ParseGroupVersion(meta.APIVersion)
		if err != nil {
			return err
		}
		o, err := scheme.New(gv.WithKind(meta.Kind))
		if err != nil {
			return fmt.Errorf("%s %s is not a kind of Cluster API, clusterctl or this provider: %w", meta.APIVersion, meta.Kind, err)
		}
		obj = o
	}
	// Strict: an unknown field, a value of the wrong type or a repeated key fails.
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		return fmt.Errorf("%s: %w", meta.Kind, err)
	}
	return admit(obj)
}

// admit runs admission's field checks over this provider's kinds.
func admit(obj any) error {
	gates := feature.NewFeatureGates()
	if err := gates.SetFromMap(map[string]bool{string(feature.KubeadmBootstrapFormatIgnition): true, string(feature.KubeadmBootstrapFormatRaw): true}); err != nil {
		return err
	}
	var errs field.ErrorList
	switch o := obj.(type) {
	case *bootstrapv1.KubeadmConfig:
		errs = fieldrules.Validate(&o.Spec, gates, field.NewPath("spec"))
	case *bootstrapv1.KubeadmConfigTemplate:
		errs = fieldrules.Validate(&o.Spec.Template.Spec, gates, field.NewPath("spec", "template", "spec"))
	}
	return errs.ToAggregate()
}
