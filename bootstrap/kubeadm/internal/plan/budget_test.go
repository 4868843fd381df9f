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
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/hostile"
)

// hostileSpec is a worker join whose files are n copies of f.
func hostileSpec(n int, f upstreambootstrapv1.File) *bootstrapv1.KubeadmConfigSpec {
	s := plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin)
	for i := range n {
		f.Path = fmt.Sprintf("/etc/hostile/%d", i)
		s.Files = append(s.Files, f)
	}
	return s
}

func templated(content string) upstreambootstrapv1.File {
	return upstreambootstrapv1.File{Content: content, ContentFormat: upstreambootstrapv1.FileContentFormatTemplate}
}

func fromSecret(key string) upstreambootstrapv1.File {
	return upstreambootstrapv1.File{ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "big", Key: key}}}
}

// TestOneConfigCostsABoundedAmount: each spec here is small as written (a
// few KiB to a few hundred KiB) and, before the bounds held for the whole
// spec, made one render allocate hundreds of MiB to GiBs or hold a worker
// for tens of seconds. Each is now refused fast, with the field where a
// bound was reached and the bound, never content, and costs at most a few
// times the bound.
func TestOneConfigCostsABoundedAmount(t *testing.T) {
	const marker = "s3cr3t-marker"
	secrets := map[plan.SecretRef][]byte{
		{Name: "big", Key: "gzip"}:  hostile.GzipBomb(900),
		{Name: "big", Key: "plain"}: []byte(strings.Repeat(marker, machinechecks.MaxContent/len(marker))),
	}
	bombGzip := fromSecret("gzip")
	bombGzip.Encoding = upstreambootstrapv1.Gzip
	// The template writes the base64 of a 600-MiB bomb (about 830 KiB),
	// within the templates' output bound, from a few KiB of text.
	bombTemplate := templated(`{{/* ` + marker + ` */}}{{ range 600 }}` + hostile.MemberBase64() + `{{ end }}`)
	bombTemplate.Encoding = upstreambootstrapv1.GzipBase64
	for _, tc := range []struct {
		name string
		spec *bootstrapv1.KubeadmConfigSpec
		// at is the field the error names (one of them, space-separated);
		// bound is part of its message.
		at, bound string
	}{
		{"templated gzip+base64 that inflates", hostileSpec(1, bombTemplate), "spec.files[0]", "decodes to more than 1048576 bytes in all"},
		{"gzip from a Secret that inflates to 900 MiB", hostileSpec(1, bombGzip), "spec.files[0]", "decodes to more than 1048576 bytes in all"},
		{"one large Secret key named by 200 files", hostileSpec(200, fromSecret("plain")), "spec.files[1]", "comes to more than 1048576 bytes in all"},
		{"200 templates, each just under the output bound", hostileSpec(200, templated(`{{ range 1020 }}{{ printf "%1000d" 0 }}{{ end }}`+marker)),
			"spec.files[1]", "output exceeds 1048576 bytes (all templates of the KubeadmConfig together)"},
		// On a busy machine the first may run out of time already.
		{"200 templates, each just under the step bound", hostileSpec(200, templated(`{{ range 99000 }}{{ end }}`+marker)),
			"spec.files[0] spec.files[1]", "runs too long"},
		{"a template that calls itself", hostileSpec(1, templated(`{{ define "a" }}{{ if . }}{{ template "a" . }}{{ end }}{{ end }}{{ template "a" 1 }}`+marker)),
			"spec.files[0]", "calls itself"},
		{"templates nested 60 deep", hostileSpec(1, templated(strings.Repeat(`{{ with 1 }}`, 60)+marker+strings.Repeat(`{{ end }}`, 60))),
			"spec.files[0]", "more than 50 deep"},
		{"template calls 60 deep", hostileSpec(1, templated(deepCalls(60)+marker)), "spec.files[0]", "more than 50 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := plantest.Input(tc.spec, plan.ActionJoin)
			in.ReadSecret = func(ref plan.SecretRef) ([]byte, error) { return secrets[ref], nil }
			var err error
			start := time.Now()
			allocated := hostile.Allocated(func() { _, err = plan.Build(in) })
			elapsed := time.Since(start)
			if err == nil {
				t.Fatal("planned")
			}
			var te *plan.TemplateError
			var ce *machinechecks.ContentError
			at := strings.Fields(tc.at)
			switch {
			case errors.As(err, &te) && slices.Contains(at, te.Field):
			case errors.As(err, &ce) && ce.OverBudget && slices.Contains(at, ce.Field.String()):
			default:
				t.Errorf("error %v, want one at %s", err, tc.at)
			}
			if !strings.Contains(err.Error(), tc.bound) || strings.Contains(err.Error(), marker) {
				t.Errorf("error %q: want the bound %q and no content", err, tc.bound)
			}
			if limit := uint64(32 * machinechecks.MaxContent); allocated > limit {
				t.Errorf("allocated %d MiB, want at most %d", allocated>>20, limit>>20)
			}
			if elapsed > 2*time.Second {
				t.Errorf("took %s", elapsed)
			}
			t.Logf("%s after %d KiB, %s", err, allocated>>10, elapsed.Round(time.Millisecond))
		})
	}
}

// deepCalls defines templates t1 … tn, each calling the next, and calls t1.
func deepCalls(n int) string {
	var b strings.Builder
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, `{{ define "t%d" }}{{ template "t%d" }}{{ end }}`, i, i+1)
	}
	fmt.Fprintf(&b, `{{ define "t%d" }}x{{ end }}{{ template "t1" }}`, n)
	return b.String()
}

// TestContentWithinTheBoundsPlans: what the bounds allow renders: content
// up to 1 MiB in all, from templates, Secrets and inline, and templates
// that nest and call each other without recursion.
func TestContentWithinTheBoundsPlans(t *testing.T) {
	const each = machinechecks.MaxContent / 4
	s := hostileSpec(0, upstreambootstrapv1.File{})
	s.Files = []upstreambootstrapv1.File{
		{Path: "/etc/inline", Content: strings.Repeat("i", each)},
		{Path: "/etc/secret", ContentFrom: fromSecret("plain").ContentFrom},
		{Path: "/etc/template", Content: fmt.Sprintf(`{{ range %d }}{{ printf "%%1024d" 0 }}{{ end }}`, each/1024), ContentFormat: upstreambootstrapv1.FileContentFormatTemplate},
		{Path: "/etc/calls", Content: deepCalls(40) + `{{ range 2 }}{{ if true }}{{ with 1 }}{{ block "b" . }}{{ end }}{{ end }}{{ end }}{{ end }}`,
			ContentFormat: upstreambootstrapv1.FileContentFormatTemplate},
	}
	in := plantest.Input(s, plan.ActionJoin)
	in.ReadSecret = func(plan.SecretRef) ([]byte, error) { return []byte(strings.Repeat("s", each)), nil }
	p, err := plan.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Files[len(p.Files)-1].Content; got != "x" {
		t.Errorf("the nested calls rendered %q", got)
	}
}

// FuzzContentBudget: a spec of up to 200 files of every kind the budget
// counts (inline, from a Secret, templated, gzip bombs among them), each
// from two bytes of fuzz input, either plans with at most MaxContent of
// content, as written and decoded, or is refused with the file where a
// bound was reached; it never costs more than a few times the bound.
func FuzzContentBudget(f *testing.F) {
	f.Add([]byte{0, 10, 1, 200, 2, 50, 3, 4})
	f.Add([]byte(strings.Repeat("\x01\xff", 200)))
	f.Add([]byte(strings.Repeat("\x02\x80", 40)))
	f.Add([]byte{4, 2, 5, 1, 0, 255})
	secrets := map[plan.SecretRef][]byte{}
	for size := range 256 {
		secrets[plan.SecretRef{Name: "s", Key: fmt.Sprint(size)}] = []byte(strings.Repeat("s", size<<12))
	}
	secrets[plan.SecretRef{Name: "s", Key: "bomb"}] = hostile.GzipBomb(64)
	f.Fuzz(func(t *testing.T, program []byte) {
		s := hostileSpec(0, upstreambootstrapv1.File{})
		for i := 0; i+1 < len(program) && len(s.Files) < 200; i += 2 {
			n := int(program[i+1])
			file := upstreambootstrapv1.File{Path: fmt.Sprintf("/etc/f%d", len(s.Files))}
			switch program[i] % 6 {
			case 0: // inline, up to 10 KiB (the CRD's bound)
				file.Content = strings.Repeat("i", n*40)
			case 1: // from a Secret, up to 1 MiB
				file.ContentFrom = fromSecret(fmt.Sprint(n)).ContentFrom
			case 2: // templated, up to 255 KiB
				file.Content, file.ContentFormat = fmt.Sprintf(`{{ range %d }}{{ printf "%%1024d" 0 }}{{ end }}`, n), upstreambootstrapv1.FileContentFormatTemplate
			case 3: // a gzip bomb from a Secret: 64 MiB
				file.ContentFrom, file.Encoding = fromSecret("bomb").ContentFrom, upstreambootstrapv1.Gzip
			case 4: // a templated bomb: n MiB
				file.Content = fmt.Sprintf(`{{ range %d }}%s{{ end }}`, n, hostile.MemberBase64())
				file.ContentFormat, file.Encoding = upstreambootstrapv1.FileContentFormatTemplate, upstreambootstrapv1.GzipBase64
			case 5: // base64 of up to 7 KiB
				file.Content, file.Encoding = base64.StdEncoding.EncodeToString(make([]byte, n*28)), upstreambootstrapv1.Base64
			}
			s.Files = append(s.Files, file)
		}
		in := plantest.Input(s, plan.ActionJoin)
		in.ReadSecret = func(ref plan.SecretRef) ([]byte, error) { return secrets[plan.SecretRef{Name: "s", Key: ref.Key}], nil }
		var p *plan.Plan
		var err error
		allocated := hostile.Allocated(func() { p, err = plan.Build(in) })
		if limit := uint64(32 * machinechecks.MaxContent); allocated > limit {
			t.Fatalf("allocated %d MiB, want at most %d (error: %v)", allocated>>20, limit>>20, err)
		}
		if err != nil {
			var te *plan.TemplateError
			var ce *machinechecks.ContentError
			if !errors.As(err, &te) && !errors.As(err, &ce) {
				t.Fatalf("refused with neither a template nor a content error: %v", err)
			}
			return
		}
		written, decoded := 0, 0
		for _, f := range p.Files {
			if f.Kind != plan.FileUser {
				continue
			}
			b, err := f.Bytes()
			if err != nil {
				t.Fatalf("%s does not decode, yet it planned: %v", f.Source, err)
			}
			written, decoded = written+len(f.Content), decoded+len(b)
		}
		if written > machinechecks.MaxContent || decoded > machinechecks.MaxContent {
			t.Fatalf("planned %d bytes written, %d decoded", written, decoded)
		}
	})
}
