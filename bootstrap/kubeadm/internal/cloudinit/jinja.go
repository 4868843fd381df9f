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

package cloudinit

import (
	"bytes"
	"regexp"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/placeholders"
)

// The output is a Jinja template (see Header), so that {{ ds.meta_data.* }}
// works anywhere in it, as upstream. Left alone, cloud-init's Jinja would also
// change or reject text that only looks like Jinja: a Helm or Go template in a
// file ({{ .Values.x }} is a syntax error, and cloud-init then ignores the
// whole user data), an unknown name (rendered as CI_MISSING_JINJA_VAR/name) or
// bash's ${#array[@]} (an unterminated Jinja comment). escapeJinja rewrites
// such delimiters so that Jinja outputs them as written.
var (
	expression   = regexp.MustCompile(`(?s)^\{\{(?:'[^']*'|"(?:[^"\\]|\\.)*"|\\"(?:[^"\\]|\\[^"])*\\"|[^'"}]|\}[^}'"])*\}\}`)
	literal      = regexp.MustCompile(`(?s)^\{\{-?\s*('[^'\\]*'|"[^"\\]*")\s*-?\}\}$`)
	rawBlock     = regexp.MustCompile(`(?s)^\{%-?\s*raw\s*-?%\}.*?\{%-?\s*endraw\s*-?%\}`)
	statementTag = regexp.MustCompile(`\{%-?\s*([A-Za-z_]+)`)
)

// jinjaStatements are the tags that open Jinja logic; a document with one is
// written in Jinja on purpose.
var jinjaStatements = map[string]bool{
	"if": true, "for": true, "set": true, "macro": true, "call": true, "filter": true, "with": true,
	"block": true, "include": true, "import": true, "from": true, "extends": true, "autoescape": true,
}

// escapeJinja keeps as Jinja what the user can mean as Jinja: expressions
// that read cloud-init's instance data, quoted-string expressions ({{ '{{' }},
// Jinja's own way to write braces) and {% raw %} blocks. Every other {{, {%
// and {# becomes an expression that outputs it. A document that uses Jinja
// statements ({% if %}, {% for %}, ...) is left as it is: its author writes Jinja,
// and gets it rendered exactly as upstream would.
func escapeJinja(b []byte) []byte {
	if !bytes.Contains(b, []byte("{{")) && !bytes.Contains(b, []byte("{%")) && !bytes.Contains(b, []byte("{#")) {
		return b
	}
	for _, m := range statementTag.FindAllSubmatch(b, -1) {
		if jinjaStatements[string(m[1])] {
			return b
		}
	}
	out := make([]byte, 0, len(b)+64)
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '{')
		if j < 0 {
			out = append(out, b[i:]...)
			break
		}
		out = append(out, b[i:i+j]...)
		i += j
		rest := b[i:]
		if len(rest) < 2 || (rest[1] != '{' && rest[1] != '%' && rest[1] != '#') {
			out = append(out, '{')
			i++
			continue
		}
		if m := rawBlock.Find(rest); m != nil {
			out = append(out, m...)
			i += len(m)
			continue
		}
		if m := expression.Find(rest); rest[1] == '{' && m != nil && keepExpression(string(unquoteYAML(m))) {
			// In a double-quoted YAML scalar the expression's own quotes are
			// escaped; Jinja reads the text before YAML does, so it gets them
			// back (the rendered value replaces them anyway).
			out = append(out, unquoteYAML(m)...)
			i += len(m)
			continue
		}
		out = append(out, "{{ '"...)
		out = append(out, rest[:2]...)
		out = append(out, "' }}"...)
		i += 2
	}
	return out
}

func keepExpression(expr string) bool {
	if literal.MatchString(expr) {
		return true
	}
	found := placeholders.Find(expr)
	return len(found) == 1 && found[0].InstanceData
}

// unquoteYAML undoes the \" and \\ escapes a double-quoted YAML scalar puts
// into an expression.
func unquoteYAML(expr []byte) []byte {
	if !bytes.Contains(expr, []byte{'\\'}) {
		return expr
	}
	out := make([]byte, 0, len(expr))
	for i := 0; i < len(expr); i++ {
		if expr[i] == '\\' && i+1 < len(expr) && (expr[i+1] == '"' || expr[i+1] == '\\') {
			i++
		}
		out = append(out, expr[i])
	}
	return out
}
