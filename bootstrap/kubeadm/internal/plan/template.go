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
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	texttemplate "text/template"
	"text/template/parse"
	"time"
)

// spec.files templates (contentFormat: Template) are user input executed inside
// the controller, so their cost is bounded before it is paid, for all the
// templates of one KubeadmConfig together: the template's text, the output,
// the size of every value a builtin builds (checked before building it) and
// of all of them together, the number of actions executed (every action,
// range iteration and template call is a step), time (checked at every step
// and in every builtin) and how deeply templates nest (checked before they
// run). A template over any bound fails its KubeadmConfig; it never stalls a
// worker or exhausts its memory, however many files the spec templates.
const (
	maxTemplateOutput = 1 << 20
	// maxTemplateBuilt bounds the bytes all builtins of one render build
	// together: values can be discarded or kept in variables, and either way
	// their memory was allocated.
	maxTemplateBuilt = 8 << 20
	// maxTemplateSteps bounds actions executed, range iterations and template
	// invocations.
	maxTemplateSteps = 100_000
	maxTemplateTime  = 250 * time.Millisecond
	// maxFormatWidth bounds printf widths and precisions, which fmt would
	// otherwise allocate in full before anything is written.
	maxFormatWidth = 4096
	// maxTemplateText is the most template text a file may have, inline (the
	// CRD's limit on content) or from a Secret (contentFrom).
	maxTemplateText = 10240
	// maxTemplateDepth bounds how deeply control structures, parenthesized
	// pipelines and template calls nest: each level is a frame of the
	// executing goroutine's stack.
	maxTemplateDepth = 50
)

// TemplateError is a spec.files template that does not parse or fails. Its
// message names the field, the file's path and the line, never the template's
// text: content can come from a Secret (contentFrom).
type TemplateError struct {
	// Field is the file's field path, e.g. spec.files[2].
	Field string
	// Path is the file's path on the machine.
	Path string
	// Problem says what went wrong, without template text.
	Problem string
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("%s: template for %s %s", e.Field, e.Path, e.Problem)
}

const allTemplates = "all templates of the KubeadmConfig together"

var (
	errTemplateBudget    = fmt.Errorf("runs too long (over %d actions, loop iterations and template calls, or %s, %s)", maxTemplateSteps, maxTemplateTime, allTemplates)
	errTemplateSize      = fmt.Errorf("builds a value that can be larger than %d bytes", maxTemplateOutput)
	errTemplateBuilt     = fmt.Errorf("builds more than %d bytes of values (%s)", maxTemplateBuilt, allTemplates)
	errTemplateOutput    = fmt.Errorf("output exceeds %d bytes (%s)", maxTemplateOutput, allTemplates)
	errFormatWidth       = fmt.Errorf("uses a printf width or precision over %d (or *)", maxFormatWidth)
	errTemplateText      = fmt.Errorf("is longer than %d bytes of template text", maxTemplateText)
	errTemplateRecursion = errors.New("calls itself through template or block, which nests without end")
	errTemplateDepth     = fmt.Errorf("nests control structures, parentheses and template calls more than %d deep", maxTemplateDepth)
)

// templateLine finds "name:LINE:" in text/template's messages, which otherwise
// quote the template's own text.
var templateLine = regexp.MustCompile(`:(\d+)(?::\d+)?: `)

func templateProblem(verb string, err error) string {
	for _, known := range []error{errTemplateBudget, errTemplateSize, errTemplateBuilt, errTemplateOutput, errFormatWidth, errTemplateRecursion, errTemplateDepth} {
		if errors.Is(err, known) {
			return known.Error()
		}
	}
	if m := templateLine.FindStringSubmatch(err.Error()); m != nil {
		return verb + " at line " + m[1]
	}
	return verb
}

// stepFunc is called before every action, at the start of every range
// iteration and of every template body; its name cannot clash with a builtin.
const stepFunc = "_cabpkStep"

// templateBudget is what all spec.files templates of one render spend
// together, so that a spec of many templated files costs no more than one.
type templateBudget struct {
	steps    int
	built    int
	output   int
	deadline time.Time
}

// templateRun is one template's execution: the render's budget and this
// file's output.
type templateRun struct {
	*templateBudget
	out bytes.Buffer
}

func (r *templateRun) step() (string, error) {
	r.steps++
	if r.steps > maxTemplateSteps || time.Now().After(r.deadline) {
		return "", errTemplateBudget
	}
	return "", nil
}

// spend books a value of at most size bytes that a builtin is about to
// build, before it is built.
func (r *templateRun) spend(size int) error {
	if time.Now().After(r.deadline) {
		return errTemplateBudget
	}
	if size > maxTemplateOutput {
		return errTemplateSize
	}
	r.built += size
	if r.built > maxTemplateBuilt {
		return errTemplateBuilt
	}
	return nil
}

func (r *templateRun) Write(p []byte) (int, error) {
	if r.output+len(p) > maxTemplateOutput {
		return 0, errTemplateOutput
	}
	r.output += len(p)
	return r.out.Write(p)
}

// formatWidths refuses printf widths and precisions over maxFormatWidth, and
// widths taken from arguments, and returns the sum of the others: the padding
// the format can add.
func formatWidths(format string) (int, error) {
	total := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0", format[j]) >= 0 {
			j++
		}
		for j < len(format) && (format[j] >= '0' && format[j] <= '9' || format[j] == '.' || format[j] == '*' || format[j] == '[' || format[j] == ']') {
			if format[j] == '*' || format[j] == '[' {
				return 0, errFormatWidth
			}
			k := j
			for k < len(format) && format[k] >= '0' && format[k] <= '9' {
				k++
			}
			if k > j {
				n, err := strconv.Atoi(format[j:k])
				if err != nil || n > maxFormatWidth {
					return 0, errFormatWidth
				}
				total += n
				j = k
				continue
			}
			j++
		}
		i = j
	}
	return total, nil
}

// printfExpansion is the most one operand byte becomes under any verb: %q
// writes \x00 for a byte, %v of a []byte "255 ", "% x" "ff ".
const printfExpansion = 4

// printf bounds what fmt.Sprintf can build before it builds it: the format's
// text and padding, and each operand at its largest expansion (with quotes).
func (r *templateRun) printf(format string, args ...any) (string, error) {
	widths, err := formatWidths(format)
	if err != nil {
		return "", err
	}
	size := len(format) + widths
	for _, a := range args {
		size += printfExpansion * (argSize(a) + 2)
	}
	if err := r.spend(size); err != nil {
		return "", err
	}
	return fmt.Sprintf(format, args...), nil
}

func argSize(a any) int {
	switch v := a.(type) {
	case string:
		return len(v)
	case []byte:
		return len(v)
	}
	// Everything else the template data offers is small (versions, maps of them).
	return len(fmt.Sprint(a))
}

// joinedSize is the most fmt.Sprint or Sprintln makes of args: each operand
// and a separator.
func joinedSize(args []any) int {
	size := 0
	for _, a := range args {
		size += argSize(a) + 1
	}
	return size
}

func (r *templateRun) print(join func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		if err := r.spend(joinedSize(args)); err != nil {
			return "", err
		}
		return join(args...), nil
	}
}

// The escapers' largest expansion of one input byte: html writes "&#34;"
// for '"', js "\u003C" for '<' (and \uXXXX for unprintable runes), urlquery
// "%XX".
const (
	htmlExpansion     = 5
	jsExpansion       = 6
	urlQueryExpansion = 3
)

func (r *templateRun) escaper(escape func(...any) string, expansion int) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		if err := r.spend(joinedSize(args) * expansion); err != nil {
			return "", err
		}
		return escape(args...), nil
	}
}

// instrument makes every action, every range iteration and every template
// body spend a step.
func instrument(node parse.Node, step *parse.ActionNode) {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		nodes := make([]parse.Node, 0, 2*len(n.Nodes))
		for _, c := range n.Nodes {
			instrument(c, step)
			if _, text := c.(*parse.TextNode); !text {
				nodes = append(nodes, step)
			}
			nodes = append(nodes, c)
		}
		n.Nodes = nodes
	case *parse.RangeNode:
		instrument(n.List, step)
		instrument(n.ElseList, step)
		// An iteration spends a step even when its body has no action.
		if n.List != nil {
			n.List.Nodes = append([]parse.Node{step}, n.List.Nodes...)
		}
	case *parse.IfNode:
		instrument(n.List, step)
		instrument(n.ElseList, step)
	case *parse.WithNode:
		instrument(n.List, step)
		instrument(n.ElseList, step)
	}
}

// checkNesting refuses templates of t that can call themselves (text/template
// would recurse until the stack is tens of MiB) or that nest deeper than
// maxTemplateDepth, each template call counted with the template it calls.
// Each template's height is computed once, so calls that fan out cost no
// more than the text that makes them.
func checkNesting(t *texttemplate.Template) error {
	trees := map[string]*parse.Tree{}
	for _, tt := range t.Templates() {
		if tt.Tree != nil && tt.Tree.Root != nil {
			trees[tt.Name()] = tt.Tree
		}
	}
	heights := map[string]int{}
	calling := map[string]bool{}
	var height func(n parse.Node, level int) (int, error)
	call := func(name string, level int) (int, error) {
		if h, ok := heights[name]; ok {
			if level+h > maxTemplateDepth {
				return 0, errTemplateDepth
			}
			return h, nil
		}
		tree, ok := trees[name]
		if !ok {
			return 0, nil // undefined: executing it fails
		}
		if calling[name] {
			return 0, errTemplateRecursion
		}
		calling[name] = true
		h, err := height(tree.Root, level)
		delete(calling, name)
		heights[name] = h
		return h, err
	}
	height = func(n parse.Node, level int) (int, error) {
		if level > maxTemplateDepth {
			return 0, errTemplateDepth
		}
		kids, nests := nested(n)
		if nests {
			level++
		}
		h := 0
		for _, k := range kids {
			kh, err := height(k, level)
			if err != nil {
				return 0, err
			}
			h = max(h, kh)
		}
		if tn, ok := n.(*parse.TemplateNode); ok {
			ch, err := call(tn.Name, level)
			if err != nil {
				return 0, err
			}
			h = max(h, ch)
		}
		if nests {
			h++
		}
		return h, nil
	}
	_, err := call(t.Name(), 0)
	return err
}

// nested returns the nodes within n and whether n is a level of nesting of
// its own (a control structure, a pipeline, a template call).
func nested(n parse.Node) ([]parse.Node, bool) {
	branch := func(b *parse.BranchNode) []parse.Node {
		kids := []parse.Node{b.Pipe, b.List}
		if b.ElseList != nil {
			kids = append(kids, b.ElseList)
		}
		return kids
	}
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil, false
		}
		return n.Nodes, false
	case *parse.ActionNode:
		return []parse.Node{n.Pipe}, false
	case *parse.PipeNode:
		var args []parse.Node
		for _, c := range n.Cmds {
			args = append(args, c.Args...)
		}
		return args, true
	case *parse.IfNode:
		return branch(&n.BranchNode), true
	case *parse.RangeNode:
		return branch(&n.BranchNode), true
	case *parse.WithNode:
		return branch(&n.BranchNode), true
	case *parse.TemplateNode:
		if n.Pipe == nil {
			return nil, true
		}
		return []parse.Node{n.Pipe}, true
	}
	return nil, false
}

// renderTemplate executes a spec.files template with upstream's data and
// options (a missing key renders as the zero value, so `{{ if .controlPlane }}`
// works when the control-plane version is unknown), within the bounds above,
// spending budget, which the render's other templates share.
func renderTemplate(name, content string, data map[string]any, budget *templateBudget) (string, error) {
	if len(content) > maxTemplateText {
		return "", errTemplateText
	}
	if budget.deadline.IsZero() {
		budget.deadline = time.Now().Add(maxTemplateTime)
	}
	run := &templateRun{templateBudget: budget}
	funcs := texttemplate.FuncMap{
		stepFunc:   run.step,
		"printf":   run.printf,
		"print":    run.print(fmt.Sprint),
		"println":  run.print(fmt.Sprintln),
		"html":     run.escaper(texttemplate.HTMLEscaper, htmlExpansion),
		"js":       run.escaper(texttemplate.JSEscaper, jsExpansion),
		"urlquery": run.escaper(texttemplate.URLQueryEscaper, urlQueryExpansion),
	}
	t, err := texttemplate.New(name).Funcs(funcs).Parse(content)
	if err != nil {
		return "", errors.New(templateProblem("does not parse", err))
	}
	if err := checkNesting(t); err != nil {
		return "", err
	}
	stepper, err := texttemplate.New("step").Funcs(funcs).Parse("{{" + stepFunc + "}}")
	if err != nil {
		return "", err
	}
	step := stepper.Tree.Root.Nodes[0].(*parse.ActionNode)
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Tree.Root == nil {
			continue
		}
		// Every list gets a step before each of its actions; a range's
		// body and a template's body get one more at their start (one
		// per iteration, one per call, even when they hold no action).
		instrument(tt.Tree.Root, step)
		tt.Tree.Root.Nodes = append([]parse.Node{step}, tt.Tree.Root.Nodes...)
	}
	if err := t.Execute(run, data); err != nil {
		return "", errors.New(templateProblem("fails", err))
	}
	return run.out.String(), nil
}
