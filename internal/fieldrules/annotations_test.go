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

package fieldrules

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

const butaneDoc = "variant: flatcar\nversion: 1.1.0\nstorage:\n  files:\n  - path: /etc/motd\n    contents:\n      inline: hello\n"

func TestAnnotationsChooseFormatAndButane(t *testing.T) {
	meta, specPath := field.NewPath("metadata", "annotations"), field.NewPath("spec")
	formatAt := meta.Key(bootstrapv1.FormatAnnotation).String()
	butaneAt := meta.Key(bootstrapv1.IgnitionButaneAnnotation).String()
	for _, tc := range []struct {
		name        string
		spec        bootstrapv1.Format
		annotations map[string]string
		ignition    bool
		raw         bool
		wantFormat  bootstrapv1.Format
		wantButane  bool
		wantErrs    []string // field paths
		wantDetail  string
	}{
		{name: "none", spec: bootstrapv1.CloudConfig, wantFormat: bootstrapv1.CloudConfig},
		{name: "raw over KCP's default", spec: bootstrapv1.CloudConfig, annotations: map[string]string{bootstrapv1.FormatAnnotation: "raw"}, raw: true, wantFormat: bootstrapv1.Raw},
		{name: "raw over an empty format", annotations: map[string]string{bootstrapv1.FormatAnnotation: "raw"}, raw: true, wantFormat: bootstrapv1.Raw},
		{name: "agreeing", spec: bootstrapv1.Ignition, annotations: map[string]string{bootstrapv1.FormatAnnotation: "ignition"}, ignition: true, wantFormat: bootstrapv1.Ignition},
		{name: "contradicting spec.format", spec: bootstrapv1.Ignition, annotations: map[string]string{bootstrapv1.FormatAnnotation: "raw"}, ignition: true, raw: true,
			wantErrs: []string{formatAt}, wantDetail: `contradicts spec.format "ignition"`},
		{name: "unknown format", annotations: map[string]string{bootstrapv1.FormatAnnotation: "cloud-init"}, wantErrs: []string{formatAt}},
		{name: "gate off", spec: bootstrapv1.CloudConfig, annotations: map[string]string{bootstrapv1.FormatAnnotation: "raw"},
			wantErrs: []string{formatAt}, wantDetail: "KubeadmBootstrapFormatRaw"},
		{name: "butane with ignition from the annotation", spec: bootstrapv1.CloudConfig,
			annotations: map[string]string{bootstrapv1.FormatAnnotation: "ignition", bootstrapv1.IgnitionButaneAnnotation: butaneDoc}, ignition: true,
			wantFormat: bootstrapv1.Ignition, wantButane: true},
		{name: "butane outside ignition", annotations: map[string]string{bootstrapv1.IgnitionButaneAnnotation: butaneDoc},
			wantErrs: []string{butaneAt}, wantDetail: "takes effect only"},
		{name: "butane that does not translate", spec: bootstrapv1.Ignition, ignition: true,
			annotations: map[string]string{bootstrapv1.IgnitionButaneAnnotation: "variant: flatcar\nversion: 1.1.0\nstorage: [\n"}, wantErrs: []string{butaneAt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := joinSpec(tc.spec)
			resolved, errs, _ := ValidateAnnotated(tc.annotations, spec, gates(t, tc.ignition, tc.raw), meta, specPath)
			if got, want := strings.Join(paths(errs), ","), strings.Join(tc.wantErrs, ","); got != want {
				t.Fatalf("errors at %q, want %q: %v", got, want, errs.ToAggregate())
			}
			if tc.wantDetail != "" && !strings.Contains(errs.ToAggregate().Error(), tc.wantDetail) {
				t.Errorf("the error does not say %q: %v", tc.wantDetail, errs.ToAggregate())
			}
			if len(errs) > 0 {
				return
			}
			if resolved.EffectiveFormat() != tc.wantFormat {
				t.Errorf("renders %s, want %s", resolved.EffectiveFormat(), tc.wantFormat)
			}
			if (resolved.Ignition.Butane.AdditionalConfig != "") != tc.wantButane {
				t.Errorf("butane %q", resolved.Ignition.Butane.AdditionalConfig)
			}
			if spec.Format != tc.spec || spec.Ignition.Butane.AdditionalConfig != "" {
				t.Errorf("Resolve changed the spec it was given")
			}
		})
	}
}

// The table's messages about a format the annotation chose name the
// annotation, at the spec field they concern.
func TestAnnotatedFormatRunsTheTable(t *testing.T) {
	spec := joinSpec(bootstrapv1.CloudConfig)
	spec.PreKubeadmCommands = []string{"echo hi"}
	_, errs, _ := ValidateAnnotated(map[string]string{bootstrapv1.FormatAnnotation: "raw"}, spec, gates(t, false, true),
		field.NewPath("metadata", "annotations"), field.NewPath("spec"))
	if len(errs) != 1 || errs[0].Field != "spec.preKubeadmCommands" || !strings.Contains(errs[0].Detail, bootstrapv1.FormatAnnotation) {
		t.Fatalf("got %v", errs.ToAggregate())
	}
}
