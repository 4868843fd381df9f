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

// Command formatsdoc writes docs/reference/fields.md from formats.md.tmpl and the
// field rule table (internal/fieldrules), so the page can never disagree
// with admission.
//
//	go -C hack run ./formatsdoc "$PWD/docs/reference/fields.md"
package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/template"

	"k8s.io/component-base/featuregate"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/placeholders"
)

// The page's text; << >> delimit the template's actions, because the page
// quotes Jinja's {{ }}.
//
//go:embed formats.md.tmpl
var pageTemplate string

// page is what the template fills in.
type page struct {
	Formats  []bootstrapv1.Format
	Rules    []row
	InPlace  []row
	Gates    []gate
	Metadata []metadataRow
	Paths    paths
}

// row is one field of the table: its treatment by each format, in the
// order of Formats.
type row struct {
	Field, Description string
	Cells              []string
}

type gate struct{ Format, Gate, EnvVar string }

// metadataRow is one placeholder: how Jinja spells it, and the Afterburn
// attributes the ignition format tries for it.
type metadataRow struct{ Key, Spellings, Attributes string }

type paths struct{ Config, Script, Done, Unit, Metadata string }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: formatsdoc OUTPUT.md")
		os.Exit(2)
	}
	b, err := render()
	if err == nil {
		err = os.WriteFile(os.Args[1], b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// render fills in the page.
func render() ([]byte, error) {
	t, err := template.New("formats.md").Delims("<<", ">>").Parse(pageTemplate)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func data() page {
	p := page{
		Formats: bootstrapv1.Formats,
		Paths: paths{
			Config: bootstrapv1.IgnitionKubeadmConfigPath, Script: bootstrapv1.IgnitionKubeadmScriptPath,
			Done: bootstrapv1.IgnitionKubeadmDoneMarker, Unit: bootstrapv1.IgnitionKubeadmUnit, Metadata: bootstrapv1.IgnitionMetadataEnvFile,
		},
	}
	for _, r := range fieldrules.Rules {
		rw := row{Field: r.Field, Description: r.Description}
		for _, f := range bootstrapv1.Formats {
			t := r.Treatment(f)
			cell := string(t.Verdict)
			if t.Note != "" {
				cell += ": " + t.Note
			}
			rw.Cells = append(rw.Cells, cell)
		}
		p.Rules = append(p.Rules, rw)
		if r.InPlace {
			p.InPlace = append(p.InPlace, row{Field: r.Field, Description: r.Description})
		}
	}
	for f, g := range map[bootstrapv1.Format]featuregate.Feature{bootstrapv1.Ignition: feature.KubeadmBootstrapFormatIgnition, bootstrapv1.Raw: feature.KubeadmBootstrapFormatRaw} {
		p.Gates = append(p.Gates, gate{Format: string(f), Gate: string(g), EnvVar: feature.EnvVar(g)})
	}
	slices.SortFunc(p.Gates, func(a, b gate) int { return strings.Compare(a.Format, b.Format) })
	for _, k := range rawv1.MetadataKeys {
		var spell []string
		for _, s := range placeholders.Spellings[k] {
			spell = append(spell, "`{{ "+s+" }}`")
		}
		var names []string
		for _, a := range placeholders.AfterburnAttributes[k] {
			if n, ok := strings.CutPrefix(a, "COREOS_"); ok {
				names = append(names, n)
			}
		}
		attrs := strings.Join(names, ", ") + ", each as `COREOS_<name>` (Flatcar), then as `AFTERBURN_<name>`"
		if k == rawv1.MetadataLocalHostname {
			attrs += ", then the machine's `hostname`"
		}
		p.Metadata = append(p.Metadata, metadataRow{Key: string(k), Spellings: strings.Join(spell, ", "), Attributes: attrs})
	}
	return p
}
