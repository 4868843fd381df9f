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

// Package raw renders a bootstrap plan as kubeadm's own configuration and
// nothing else, for agent-based providers whose agent runs kubeadm itself.
//
// The bootstrap data has two parts (two keys of the data secret):
//   - value: the kubeadm configuration stream, accepted as-is by
//     `kubeadm init --config`, `kubeadm join --config` and `kubeadm config validate`;
//   - files: a BootstrapFiles document listing the files kubeadm expects to
//     find before it runs (the cluster PKI on control-plane machines, the
//     discovery kubeconfig for file discovery, the spec's kubeadm patches)
//     and the placeholders the agent fills in `value`. Absent when there are
//     neither.
//
// The files travel separately because `kubeadm config validate` rejects any
// document kind it does not know. docs/agents/raw-format.md describes the schema.
package raw

import (
	"fmt"
	"slices"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/yaml11"
)

// The document types are public (agents read them); the renderer writes them.
const (
	FilesKey        = rawv1.FilesKey
	FilesAPIVersion = rawv1.GroupVersion
	FilesKind       = rawv1.FilesKind
)

// FilesDocument is the BootstrapFiles document.
type FilesDocument = rawv1.BootstrapFiles

// Output is the raw bootstrap data.
type Output struct {
	// Value is the kubeadm configuration stream.
	Value []byte
	// Files is the BootstrapFiles YAML, nil when kubeadm needs no files.
	Files []byte
}

// Render returns the raw bootstrap data for p. A plan carries nothing a
// kubeadm-only document cannot: plan.Build refused it (the rule table).
func Render(p *plan.Plan) (*Output, error) {
	declared, err := declaredPlaceholders(p)
	if err != nil {
		return nil, err
	}
	out := &Output{Value: p.Kubeadm.AppendConfigYAML(nil)}
	if len(p.Files) > 0 || len(declared) > 0 {
		out.Files = appendFiles(nil, p, declared)
	}
	return out, nil
}

// declaredPlaceholders lists the kubeadm configuration's placeholders for the
// agent to fill, refusing any it could not.
func declaredPlaceholders(p *plan.Plan) ([]rawv1.Placeholder, error) {
	found, err := p.Kubeadm.Placeholders()
	if err != nil {
		return nil, fmt.Errorf("the raw format: %w", err)
	}
	out := make([]rawv1.Placeholder, len(found))
	for i, ph := range found {
		out[i] = rawv1.Placeholder{Text: ph.Text, Metadata: ph.Metadata}
	}
	return out, nil
}

// appendFiles writes the BootstrapFiles document in one pass; its contents
// (PEM, kubeconfig) become literal blocks, copied about once.
func appendFiles(b []byte, p *plan.Plan, declared []rawv1.Placeholder) []byte {
	size := 128
	for _, f := range p.Files {
		size += len(f.Path) + len(f.Content) + len(f.Content)/12 + 64
	}
	b = slices.Grow(b, size)
	b = append(b, "apiVersion: "+FilesAPIVersion+"\nkind: "+FilesKind+"\naction:"...)
	b = yaml11.AppendString(b, string(p.Action), 0)
	if len(p.Files) == 0 {
		b = append(b, "files: []\n"...)
	} else {
		b = append(b, "files:\n"...)
	}
	for _, f := range p.Files {
		b = append(b, "- path:"...)
		b = yaml11.AppendString(b, f.Path, 2)
		if f.Owner != "" {
			b = append(b, "  owner:"...)
			b = yaml11.AppendString(b, f.Owner, 2)
		}
		if f.Permissions != "" {
			b = append(b, "  permissions:"...)
			b = yaml11.AppendString(b, f.Permissions, 2)
		}
		b = append(b, "  content:"...)
		b = yaml11.AppendString(b, f.Content, 2)
	}
	if len(declared) > 0 {
		b = append(b, "placeholders:\n"...)
		for _, ph := range declared {
			b = append(b, "- text:"...)
			b = yaml11.AppendString(b, ph.Text, 2)
			b = append(b, "  metadata:"...)
			b = yaml11.AppendString(b, string(ph.Metadata), 2)
		}
	}
	return b
}
