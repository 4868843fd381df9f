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
// the controller, so their cost is bounded: output, the size of every value a
// builtin builds, the number of loop iterations and template calls, and time.
// A template over any bound fails its KubeadmConfig; it never stalls a worker.
const (
	maxTemplateOutput = 1 << 20
	// maxTemplateSteps bounds range iterations plus template invocations.
	maxTemplateSteps = 100_000
	maxTemplateTime  = 250 * time.Millisecond
	// maxFormatWidth bounds printf widths and precisions, which fmt would
	// otherwise allocate in full before anything is written.
	maxFormatWidth = 4096
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

var (
	errTemplateBudget = fmt.Errorf("runs too long (over %d loop iterations and template calls, or %s)", maxTemplateSteps, maxTemplateTime)
	errTemplateSize   = fmt.Errorf("builds a value larger than %d bytes", maxTemplateOutput)
	errTemplateOutput = fmt.Errorf("output exceeds %d bytes", maxTemplateOutput)
	errFormatWidth    = fmt.Errorf("uses a printf width or precision over %d (or *)", maxFormatWidth)
)

// templateLine finds "name:LINE:" in text/template's messages, which otherwise
// quote the template's own text.
var templateLine = regexp.MustCompile(`:(\d+)(?::\d+)?: `)

func templateProblem(verb string, err error) string {
	for _, known := range []error{errTemplateBudget, errTemplateSize, errTemplateOutput, errFormatWidth} {
		if errors.Is(err, known) {
			return known.Error()
		}
	}
	if m := templateLine.FindStringSubmatch(err.Error()); m != nil {
		return verb + " at line " + m[1]
	}
	return verb
}

// stepFunc is called at the start of every range iteration and every template
// body; its name cannot clash with a builtin.
const stepFunc = "_cabpkStep"

type templateRun struct {
	steps    int
	deadline time.Time
	out      bytes.Buffer
}

func (r *templateRun) step() (string, error) {
	r.steps++
	if r.steps > maxTemplateSteps || time.Now().After(r.deadline) {
		return "", errTemplateBudget
	}
	return "", nil
}

func (r *templateRun) Write(p []byte) (int, error) {
	if r.out.Len()+len(p) > maxTemplateOutput {
		return 0, errTemplateOutput
	}
	return r.out.Write(p)
}

func capped(s string) (string, error) {
	if len(s) > maxTemplateOutput {
		return "", errTemplateSize
	}
	return s, nil
}

// guardedPrintf checks widths and the size of its arguments before fmt builds
// the whole result in memory.
func guardedPrintf(format string, args ...any) (string, error) {
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
				return "", errFormatWidth
			}
			k := j
			for k < len(format) && format[k] >= '0' && format[k] <= '9' {
				k++
			}
			if k > j {
				if n, err := strconv.Atoi(format[j:k]); err != nil || n > maxFormatWidth {
					return "", errFormatWidth
				}
				j = k
				continue
			}
			j++
		}
		i = j
	}
	size := len(format)
	for _, a := range args {
		size += argSize(a)
	}
	if size > maxTemplateOutput {
		return "", errTemplateSize
	}
	return capped(fmt.Sprintf(format, args...))
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

func guardedPrint(join func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		size := 0
		for _, a := range args {
			size += argSize(a) + 1
		}
		if size > maxTemplateOutput {
			return "", errTemplateSize
		}
		return capped(join(args...))
	}
}

func guardedEscaper(escape func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) { return capped(escape(args...)) }
}

// instrument makes every range iteration and every template body spend a step.
func instrument(node parse.Node, step *parse.ActionNode) {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			instrument(c, step)
		}
	case *parse.RangeNode:
		instrument(n.List, step)
		instrument(n.ElseList, step)
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

// renderTemplate executes a spec.files template with upstream's data and
// options (a missing key renders as the zero value, so `{{ if .controlPlane }}`
// works when the control-plane version is unknown), within the bounds above.
func renderTemplate(name, content string, data map[string]any) (string, error) {
	run := &templateRun{deadline: time.Now().Add(maxTemplateTime)}
	funcs := texttemplate.FuncMap{
		stepFunc:   run.step,
		"printf":   guardedPrintf,
		"print":    guardedPrint(fmt.Sprint),
		"println":  guardedPrint(fmt.Sprintln),
		"html":     guardedEscaper(texttemplate.HTMLEscaper),
		"js":       guardedEscaper(texttemplate.JSEscaper),
		"urlquery": guardedEscaper(texttemplate.URLQueryEscaper),
	}
	t, err := texttemplate.New(name).Funcs(funcs).Parse(content)
	if err != nil {
		return "", errors.New(templateProblem("does not parse", err))
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
		instrument(tt.Tree.Root, step)
		tt.Tree.Root.Nodes = append([]parse.Node{step}, tt.Tree.Root.Nodes...)
	}
	if err := t.Execute(run, data); err != nil {
		return "", errors.New(templateProblem("fails", err))
	}
	return run.out.String(), nil
}
