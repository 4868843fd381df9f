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

// Package butane translates Butane documents (Flatcar variant) to Ignition
// configs with Butane's own translator, so that the Ignition renderer and
// admission (which must reject a document that does not translate) agree.
package butane

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	butanecommon "github.com/coreos/butane/config/common"
	flatcarbutane "github.com/coreos/butane/config/flatcar/v1_1"
	ignconfig "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/coreos/vcontext/report"
	"github.com/coreos/vcontext/tree"
	"go.yaml.in/yaml/v3"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlerrors"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlsize"
)

const (
	// Variant and Version are the Butane dialect additional configuration is
	// read as: Flatcar's stable Butane variant, which translates to Ignition 3.4.
	Variant = "flatcar"
	Version = "1.1.0"
)

// Translate translates a Butane document (variant flatcar) to an
// Ignition config. variant and version may be omitted; other variants or
// versions are refused because their output would not merge into ours. With
// strict, any warning is an error; otherwise the warnings are returned.
// Errors and warnings are Butane's own messages, without the values they
// quote (see internal/yamlerrors).
// A document that expands through aliases to more than
// yamlsize.ExtraIgnitionConfig bytes is refused before anything decodes it.
func Translate(doc string, strict bool) (types.Config, []string, error) {
	cfg, warnings, err := translate(doc, strict)
	return cfg, warnings, yamlerrors.RedactError(err)
}

func translate(doc string, strict bool) (types.Config, []string, error) {
	// Bounded before anything decodes it: Butane expands aliases in
	// memory. The check parses with Butane's own YAML parser, and so does
	// the header read: no document one of them refuses reaches another.
	if err := yamlsize.Check([]byte(doc), yamlsize.ExtraIgnitionConfig); err != nil {
		return types.Config{}, nil, err
	}
	var header struct {
		Variant string `yaml:"variant"`
		Version string `yaml:"version"`
	}
	if err := yaml.Unmarshal([]byte(doc), &header); err != nil {
		return types.Config{}, nil, fmt.Errorf("not valid YAML: %w", err)
	}
	added := 0 // header lines added in front, taken off positions again
	switch {
	case header.Variant == "" && header.Version == "":
		doc = "variant: " + Variant + "\nversion: " + Version + "\n" + doc
		added = 2
	case header.Variant != Variant || header.Version != Version:
		return types.Config{}, nil, fmt.Errorf("only variant %s version %s is supported (or omit both)", Variant, Version)
	}
	out, r, err := flatcarbutane.ToIgn3_4Bytes([]byte(doc), butanecommon.TranslateBytesOptions{})
	shiftLines(&r, added)
	if err != nil {
		err = errors.New(shiftLineMentions(err.Error(), added))
		if len(r.Entries) > 0 {
			return types.Config{}, nil, fmt.Errorf("%v: %s", err, trimReport(r))
		}
		return types.Config{}, nil, err
	}
	if strict && len(r.Entries) > 0 {
		return types.Config{}, nil, fmt.Errorf("strict mode: %s", trimReport(r))
	}
	cfg, pr, err := ignconfig.Parse(out)
	if err != nil {
		return types.Config{}, nil, fmt.Errorf("translated config is invalid: %v: %s", err, trimReport(pr))
	}
	return cfg, warnings(r), nil
}

// warnings are a report's entries as redacted lines: what a translation
// that succeeded still warned about (a decimal file mode, say).
func warnings(r report.Report) []string {
	var out []string
	for _, e := range r.Entries {
		out = append(out, yamlerrors.Redact(strings.TrimSpace(e.String())))
	}
	return out
}

func trimReport(r report.Report) string {
	s := r.String()
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}

// shiftLines moves a report's positions up by lines: the user's document
// starts that many lines into what Butane read.
func shiftLines(r *report.Report, lines int) {
	if lines == 0 {
		return
	}
	shifted := map[*tree.Pos]bool{} // entries at one place share their positions
	for i := range r.Entries {
		for _, p := range []*tree.Pos{r.Entries[i].Marker.StartP, r.Entries[i].Marker.EndP} {
			if p != nil && !shifted[p] && p.Line > int64(lines) {
				p.Line -= int64(lines)
				shifted[p] = true
			}
		}
	}
}

var lineMention = regexp.MustCompile(`\bline (\d+)`)

// shiftLineMentions does shiftLines for "line N" in a parser's message.
func shiftLineMentions(msg string, lines int) string {
	if lines == 0 {
		return msg
	}
	return lineMention.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.Atoi(strings.TrimPrefix(m, "line "))
		if err != nil || n <= lines {
			return m
		}
		return "line " + strconv.Itoa(n-lines)
	})
}
