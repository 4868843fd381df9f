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

package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/hostile"
)

// maxTemplateAllocation is what one render may allocate at most: the values
// builtins build (maxTemplateBuilt) and the output, each with the copies fmt
// and the escapers make on the way, and text/template's own bookkeeping.
const maxTemplateAllocation = 6*maxTemplateBuilt + 4*maxTemplateOutput

// largeValue is template text that builds a value of 256 KiB in $a within
// the bounds, smallerValue one of 128 KiB.
const (
	largeValue   = `{{ $a := printf "%4096d" 0 }}{{ range 6 }}{{ $a = print $a $a }}{{ end }}`
	smallerValue = `{{ $a := printf "%4096d" 0 }}{{ range 5 }}{{ $a = print $a $a }}{{ end }}`
)

// TestHostileTemplatesAreRefusedBeforeTheyAllocate: the shapes that took
// gigabytes before (escapers given many large arguments; straight-line
// templates building large values action after action; template text from a
// Secret far over the inline limit) fail with their bound named, never the
// template's text, having allocated no more than the budget allows.
func TestHostileTemplatesAreRefusedBeforeTheyAllocate(t *testing.T) {
	const marker = "s3cr3t-marker"
	many := strings.Repeat(" $a", 200)
	straight := largeValue + "{{/* " + marker + " */}}" + strings.Repeat(`{{ $v := print $a $a $a }}`, 200)
	cases := map[string]struct {
		content string
		want    error
	}{
		"js of many large arguments":       {largeValue + `{{ js` + many + ` }}` + marker, errTemplateSize},
		"html of many large arguments":     {largeValue + `{{ html` + many + ` }}` + marker, errTemplateSize},
		"urlquery of many large arguments": {largeValue + `{{ urlquery` + many + ` }}` + marker, errTemplateSize},
		"js of one argument, repeated":     {smallerValue + strings.Repeat(`{{ $v := js $a }}`, 100) + marker, errTemplateBuilt},
		"straight-line values":             {straight, errTemplateBuilt},
		"printf of many large arguments":   {largeValue + `{{ printf "%s"` + many + ` }}` + marker, errTemplateSize},
		"text over the inline limit":       {strings.Repeat(`{{ $v := print "`+marker+`" }}`, 4000), errTemplateText},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			allocated := hostile.Allocated(func() { _, err = renderTemplate("/etc/t.conf", tc.content, map[string]any{}, &templateBudget{}) })
			if !errors.Is(err, tc.want) && (err == nil || err.Error() != tc.want.Error()) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), marker) {
				t.Errorf("the error quotes the template: %v", err)
			}
			if allocated > maxTemplateAllocation {
				t.Errorf("allocated %d MiB before failing, budget %d MiB", allocated>>20, maxTemplateAllocation>>20)
			}
			t.Logf("%v after %d KiB allocated", err, allocated>>10)
		})
	}
}

// templateGrammar builds a template from fuzz input: each byte picks a
// construct, among them the expensive shapes (values built from values,
// escapers of many arguments, loops, nested template calls, output).
func templateGrammar(program []byte) string {
	var b strings.Builder
	b.WriteString(`{{ define "t" }}{{ $a := print . . }}{{ $a }}{{ end }}{{ $a := "x" }}{{ $b := printf "%64d" 7 }}`)
	depth := 0
	for i, op := range program {
		n := int(op>>4) + 1
		args := strings.TrimSpace(strings.Repeat(" $a $b", n))
		switch op % 12 {
		case 0:
			fmt.Fprintf(&b, `{{ $a = print %s }}`, args)
		case 1:
			fmt.Fprintf(&b, `{{ $b = printf "%%s%%q%%x" %s }}`, args)
		case 2:
			fmt.Fprintf(&b, `{{ $a = js %s }}`, args)
		case 3:
			fmt.Fprintf(&b, `{{ $b = html %s }}`, args)
		case 4:
			fmt.Fprintf(&b, `{{ $a = urlquery %s }}`, args)
		case 5:
			fmt.Fprintf(&b, `{{ range %d }}`, n*n*n*100)
			depth++
		case 6:
			if depth > 0 {
				b.WriteString(`{{ end }}`)
				depth--
			}
		case 7:
			b.WriteString(`{{ $a }}{{ $b }}`)
		case 8:
			b.WriteString(`{{ template "t" $a }}`)
		case 9:
			fmt.Fprintf(&b, `{{ $b = printf "%%%dd" %d }}`, n*256, i)
		case 10:
			fmt.Fprintf(&b, `{{ $a = println %s }}`, args)
		case 11:
			fmt.Fprintf(&b, `{{ $v := slice $a 0 }}{{ $a = print $v }}`)
		}
	}
	b.WriteString(strings.Repeat(`{{ end }}`, depth))
	return b.String()
}

// FuzzTemplateBudget: any template the grammar builds either renders or
// fails with one of the bounds, within the allocation budget.
func FuzzTemplateBudget(f *testing.F) {
	for _, seed := range [][]byte{
		{0x10, 0xf0, 0xf0, 0xf0, 0xf2},
		{0xf5, 0xf0, 0x06, 0xf2},
		{0x05, 0x08, 0x08, 0x06},
		{0xf9, 0xf1, 0xf1, 0xf1, 0xf3},
		{0x35, 0x35, 0x07, 0x06, 0x06},
		[]byte(strings.Repeat("\xf0", 40)),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, program []byte) {
		content := templateGrammar(program)
		var err error
		allocated := hostile.Allocated(func() { _, err = renderTemplate("/etc/t.conf", content, map[string]any{}, &templateBudget{}) })
		if allocated > maxTemplateAllocation {
			t.Fatalf("allocated %d MiB (budget %d MiB), error %v, template %q", allocated>>20, maxTemplateAllocation>>20, err, content)
		}
	})
}

// nestingGrammar builds four templates, t0 to t3, from fuzz input and calls
// t0: each byte adds to one body (its top two bits) an if, a with or a
// two-round range, an end, a call of another template, or text. calls[i]
// lists the templates ti calls.
func nestingGrammar(program []byte) (text string, calls [4][]int) {
	var bodies [4]strings.Builder
	var open [4]int
	for _, op := range program {
		i := int(op >> 6)
		b := &bodies[i]
		switch arg := int(op & 0x3f); {
		case arg < 16:
			b.WriteString([]string{`{{ if 1 }}`, `{{ with 1 }}`, `{{ range 2 }}`}[arg%3])
			open[i]++
		case arg < 32:
			if open[i] > 0 {
				b.WriteString(`{{ end }}`)
				open[i]--
			}
		case arg < 48:
			fmt.Fprintf(b, `{{ template "t%d" }}`, arg%4)
			calls[i] = append(calls[i], arg%4)
		default:
			b.WriteString("x")
		}
	}
	var out strings.Builder
	for i := range bodies {
		fmt.Fprintf(&out, `{{ define "t%d" }}%s%s{{ end }}`, i, bodies[i].String(), strings.Repeat(`{{ end }}`, open[i]))
	}
	out.WriteString(`{{ template "t0" }}`)
	return out.String(), calls
}

// cycleFrom reports whether a template reachable from t0 can call itself.
func cycleFrom(calls [4][]int) bool {
	var state [4]int // 0 unseen, 1 on the path, 2 done
	var visit func(i int) bool
	visit = func(i int) bool {
		if state[i] == 1 {
			return true
		}
		if state[i] == 2 {
			return false
		}
		state[i] = 1
		for _, c := range calls[i] {
			if visit(c) {
				return true
			}
		}
		state[i] = 2
		return false
	}
	return visit(0)
}

// FuzzTemplateNesting: templates that nest and call each other either
// render or fail with a bound, within the allocation budget; every one that
// can call itself is refused before it runs.
func FuzzTemplateNesting(f *testing.F) {
	for _, seed := range [][]byte{
		{0x20, 0x40 | 0x21, 0x80 | 0x22, 0xc0 | 0x30},             // t0 → t1 → t2 … no cycle
		{0x21, 0x40 | 0x20},                                       // t0 → t1 → t0
		{0x00, 0x02, 0x22, 0x10, 0x10},                            // nested if and range calling t2
		[]byte(strings.Repeat("\x02", 60)),                        // ranges 60 deep
		{0x40 | 0x21, 0x20, 0x41, 0x42, 0x40 | 0x22, 0x80 | 0x23}, // a chain with ranges
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, program []byte) {
		text, calls := nestingGrammar(program)
		var err error
		allocated := hostile.Allocated(func() { _, err = renderTemplate("/etc/t.conf", text, map[string]any{}, &templateBudget{}) })
		if allocated > maxTemplateAllocation {
			t.Fatalf("allocated %d MiB (budget %d MiB), error %v, template %q", allocated>>20, maxTemplateAllocation>>20, err, text)
		}
		if cycleFrom(calls) && !errors.Is(err, errTemplateRecursion) && !errors.Is(err, errTemplateDepth) && !errors.Is(err, errTemplateText) {
			t.Fatalf("a template that calls itself was not refused (%v): %q", err, text)
		}
	})
}
