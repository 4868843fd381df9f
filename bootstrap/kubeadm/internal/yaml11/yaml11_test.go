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

package yaml11_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/yaml11"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

// adversarial are strings that YAML writers get wrong: YAML 1.1 keywords and
// numbers, indicators, comments, quotes, leading and trailing spaces,
// control characters, every kind of line break, and text that looks like
// document markers.
var adversarial = []string{
	"", " ", "  leading", "trailing  ", "\t", "y", "Y", "n", "N", "yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON",
	"off", "Off", "OFF", "true", "True", "TRUE", "false", "False", "null", "Null", "NULL", "~", "=", "<<", "0", "0755",
	"0o755", "0x1F", "1_000", "1e3", "1.5", ".5", ".inf", "-.Inf", ".NaN", "1:20", "190:20:30", "2001-12-14",
	"2001-12-14t21:59:43.10-05:00", "-", "- item", "?", "? key", ":", "key: value", "a:b", "a #b", "#comment", "a#b",
	`"quoted"`, "'single'", "|", ">", "|-", "%YAML 1.1", "@at", "`tick`", "{a: b}", "[a, b]", "&anchor", "*alias",
	"!tag", "!!str", "---", "...", "a\n---\nb", "a\n...\nb", "line\n", "line", "two\nlines", "two\nlines\n",
	"trailing\n\n\n", "\nleading break", "\n", "\n\n", "cr\rlf", "crlf\r\n", "nel\u0085x", "ls\u2028x", "ps\u2029x",
	"bom\ufeffx", "\ufeffbom", "nul\x00x", "bell\x07", "esc\x1b[0m", "del\x7f", "c1\u0080\u009f", "tab\tinside",
	"\ttab first\nline", "  indented first\nline", "spaces only line\n   \nafter", "ends with spaces line\n   ",
	"ends with spaces line\n   \n", "unicode é 日本 🎉", "\U0001F600\n\U0001F600", "\uFFFE\uFFFF", "back\\slash",
	"ünïcödé\nlïnës\n", "#!/bin/bash\nset -e\necho \"$X\" # comment\n",
	"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
	"apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n",
	strings.Repeat("long ", 200),
	// Special characters at every offset of an eight-byte word, in text that is otherwise a literal block.
	"abcdefgh\x7fijklmnop\n", "abcdefghijklmno\u0085pq\n", "12345678\x00\n", "1234567\x1f8\nline\n",
	"12345678\r\n12345678\n", "1234567é8\n", "abcdefg\u2028hij\n", strings.Repeat("0123456789abcdef\n", 8) + "\x01\n",
}

// randomString draws from characters that matter to YAML.
func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", "7", " ", "  ", "\t", "\n", "\r", ":", "#", "-", "?", "'", `"`, "\\", "|", ">", "!",
		"&", "*", "%", "@", "`", "{", "}", "[", "]", ",", "=", "<<", "~", "yes", "No", "on", "null", "0o", "1e", ".",
		"\u0085", "\u2028", "\u2029", "\ufeff", "\x00", "\x1f", "\x7f", "é", "日", "🎉", "---", "..."}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func corpus() []string {
	r := rand.New(rand.NewPCG(42, 7))
	out := append([]string(nil), adversarial...)
	for range 1500 {
		out = append(out, randomString(r))
	}
	return out
}

// document writes every string twice: as a sequence item at column 0 and as
// a mapping value nested in a sequence (the shape of write_files content).
func document(values []string) []byte {
	b := []byte("items:\n")
	for _, v := range values {
		b = append(b, '-')
		b = yaml11.AppendString(b, v, 0)
	}
	b = append(b, "files:\n"...)
	for _, v := range values {
		b = append(b, "- path: /x\n  content:"...)
		b = yaml11.AppendString(b, v, 2)
	}
	return b
}

// want is what a loader must read back: the string, with invalid UTF-8 bytes
// as U+FFFD (YAML text is UTF-8).
func want(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += size
	}
	return b.String()
}

func check(t *testing.T, loader string, values []string, items, files []string) {
	t.Helper()
	if len(items) != len(values) || len(files) != len(values) {
		t.Fatalf("%s read %d items and %d files, want %d", loader, len(items), len(files), len(values))
	}
	failures := 0
	for i, v := range values {
		if items[i] != want(v) || files[i] != want(v) {
			t.Errorf("%s: %q read back as %q (item) and %q (file)", loader, v, items[i], files[i])
			if failures++; failures > 10 {
				t.FailNow()
			}
		}
	}
}

// TestYAML12LoaderReadsBackExactly checks every string with yaml.v3.
func TestYAML12LoaderReadsBackExactly(t *testing.T) {
	values := corpus()
	var doc struct {
		Items []string `yaml:"items"`
		Files []struct {
			Content string `yaml:"content"`
		} `yaml:"files"`
	}
	if err := yaml.Unmarshal(document(values), &doc); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range doc.Files {
		files = append(files, f.Content)
	}
	check(t, "yaml.v3", values, doc.Items, files)
}

// TestCloudInitLoaderReadsBackExactly checks every string with cloud-init's
// own loader: what a machine makes of the user data.
func TestCloudInitLoaderReadsBackExactly(t *testing.T) {
	values := corpus()
	loaded, err := consumers.CloudInitLoad(document(values))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := loaded.(map[string]any)
	if !ok {
		t.Fatalf("loaded %T", loaded)
	}
	strs := func(v any) []string {
		var out []string
		list, _ := v.([]any)
		for _, x := range list {
			switch x := x.(type) {
			case string:
				out = append(out, x)
			case map[string]any:
				s, _ := x["content"].(string)
				if _, isString := x["content"].(string); !isString {
					s = fmt.Sprintf("<%T %v>", x["content"], x["content"])
				}
				out = append(out, s)
			default:
				out = append(out, fmt.Sprintf("<%T %v>", x, x))
			}
		}
		return out
	}
	check(t, "cloud-init", values, strs(m["items"]), strs(m["files"]))
}

func TestStylesStayReadable(t *testing.T) {
	for s, want := range map[string]string{
		"/etc/kubernetes/pki/ca.crt": " /etc/kubernetes/pki/ca.crt\n",
		"root:root":                  " \"root:root\"\n",
		"0640":                       " \"0640\"\n",
		"yes":                        " \"yes\"\n",
		"a\nb\n":                     " |2\n    a\n    b\n",
		"a\nb":                       " |2-\n    a\n    b\n",
		"a\n\n":                      " |2+\n    a\n\n",
	} {
		if got := string(yaml11.AppendString(nil, s, 2)); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %q, want %q", s, got, want)
		}
	}
}
