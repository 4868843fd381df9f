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

package plan_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
)

// buildTemplate plans a worker join whose only file is a template with content.
func buildTemplate(content, controlPlaneVersion string) (*plan.Plan, error) {
	s := plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin)
	s.Files = []upstreambootstrapv1.File{{Path: "/etc/t.conf", Content: content, ContentFormat: upstreambootstrapv1.FileContentFormatTemplate}}
	in := plantest.Input(s, plan.ActionJoin)
	in.Cluster.ControlPlaneVersion = controlPlaneVersion
	return plan.Build(in)
}

func TestTemplateWithoutControlPlaneVersionTakesElseBranch(t *testing.T) {
	const tmpl = `{{ if .controlPlane }}cp={{ .controlPlane.version }}{{ else }}standalone{{ end }}`
	for version, want := range map[string]string{"": "standalone", "1.36": "cp=v1.36.0"} {
		p, err := buildTemplate(tmpl, version)
		if err != nil {
			t.Fatalf("version %q: %v", version, err)
		}
		if got := p.Files[len(p.Files)-1].Content; got != want {
			t.Errorf("version %q: rendered %q, want %q", version, got, want)
		}
	}
}

// Each of these would stall a worker or exhaust memory without the bounds;
// each must fail fast with a TemplateError that never quotes the template.
func TestTemplatesAreBounded(t *testing.T) {
	const marker = "s3cr3t-marker"
	cases := map[string]string{
		"silent loop":        `{{/* ` + marker + ` */}}{{ range 100000000000 }}{{ end }}`,
		"nested loops":       `{{ range 1000000 }}{{ range 1000000 }}{{ end }}{{ end }}{{ "` + marker + `" }}`,
		"recursion":          `{{ define "a" }}{{ template "b" . }}{{ template "b" . }}{{ end }}{{ define "b" }}{{ template "a" . }}{{ end }}{{ template "a" . }}` + marker,
		"huge output":        `{{ range 100000000 }}` + marker + `{{ end }}`,
		"printf width":       `{{ printf "%999999999d" 1 }}` + marker,
		"printf star":        `{{ printf "%*d" 999999999 1 }}` + marker,
		"doubling":           `{{ $a := "` + marker + `" }}{{ range 64 }}{{ $a = printf "%s%s" $a $a }}{{ end }}`,
		"print doubling":     `{{ $a := "` + marker + `" }}{{ range 64 }}{{ $a = print $a $a }}{{ end }}`,
		"escaping growth":    `{{ $a := "<<<<` + marker + `" }}{{ range 64 }}{{ $a = html $a $a }}{{ end }}`,
		"unknown function":   `{{ ` + marker + ` }}`,
		"does not parse":     `{{ if ` + marker,
		"missing method map": `{{ .controlPlane.version.` + marker + ` }}`,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := buildTemplate(content, "v1.36.3")
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("took %s", elapsed)
			}
			var te *plan.TemplateError
			if !errors.As(err, &te) {
				t.Fatalf("want a TemplateError, got %v", err)
			}
			if te.Field != "spec.files[0]" || te.Path != "/etc/t.conf" {
				t.Errorf("error does not locate the file: %+v", te)
			}
			if strings.Contains(err.Error(), marker) {
				t.Errorf("error quotes the template: %v", err)
			}
		})
	}
}

func TestTemplateWithinBoundsRenders(t *testing.T) {
	p, err := buildTemplate(`{{ range 3 }}{{ printf "%-6s|" "x" }}{{ end }}`, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Files[len(p.Files)-1].Content; got != "x     |x     |x     |" {
		t.Errorf("rendered %q", got)
	}
}
