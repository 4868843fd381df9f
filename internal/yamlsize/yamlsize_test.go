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

package yamlsize_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/hostile"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlsize"
)

func TestExpanded(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      int
	}{
		{"a scalar", `abc`, 2 + (3 + 2) + 1},
		{"a mapping", `a: bc`, 2 + (2 + (1 + 2) + 1 + (2 + 2) + 1) + 1},
		{"an alias counts as what it names", "a: &x [1, 2]\nb: *x", 2 + (2 + 4 + (2 + 4 + 4) + 1 + 4 + (2 + 4 + 4) + 1) + 1},
		{"two documents add up", "a\n---\nb", 2*(2+3+1) + 0},
		{"empty", ``, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := yamlsize.Expanded([]byte(tc.doc), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("expanded size %d, want %d", got, tc.want)
			}
		})
	}
}

// TestAliasBombsAreRefusedAtOnce: documents of a few hundred bytes that
// expand to gigabytes are refused by their bound, quickly, quoting nothing.
func TestAliasBombsAreRefusedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
	}{
		{"wide levels over a large leaf (2.7 GB)", hostile.AliasBomb(14<<10, 100, 1900)},
		{"nested sequences (10 MiB)", hostile.AliasBomb(1<<10, 10, 10, 10, 10)},
		{"merge keys", "a: &a {k0: " + strings.Repeat("y", 1024) + "}\n" + mergeLevels(20)},
		{"one long scalar repeated", "s: &s " + strings.Repeat("z", 30000) + "\nl: [" + strings.Repeat("*s,", 300) + "*s]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			var err error
			alloc := hostile.Allocated(func() { err = yamlsize.Check([]byte(tc.doc), yamlsize.ExtraIgnitionConfig) })
			var tooLarge *yamlsize.TooLargeError
			if !errors.As(err, &tooLarge) || tooLarge.Limit != yamlsize.ExtraIgnitionConfig {
				t.Fatalf("got %v, want a TooLargeError at %d bytes", err, yamlsize.ExtraIgnitionConfig)
			}
			if strings.Contains(err.Error(), "xxx") || strings.Contains(err.Error(), "zzz") || strings.Contains(err.Error(), "yyy") {
				t.Errorf("the error quotes the document: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %s", d)
			}
			// The document itself is a few KiB: its tree is a small multiple.
			if alloc > 8<<20 {
				t.Errorf("checking a %d-byte document allocated %d MiB", len(tc.doc), alloc>>20)
			}
		})
	}
}

// mergeLevels is n mappings, each merging the one before twice over.
func mergeLevels(n int) string {
	var b strings.Builder
	prev := "a"
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		fmt.Fprintf(&b, "%s: &%s {<<: *%s, x: [*%s, *%s]}\n", name, name, prev, prev, prev)
		prev = name
	}
	return b.String()
}

func TestCyclesAndBrokenYAMLAreRefused(t *testing.T) {
	for _, doc := range []string{"a: &a [*a]", "a: &a {b: *a}", "a: [", "a: *nowhere", "\t- x"} {
		if err := yamlsize.Check([]byte(doc), 1<<20); err == nil {
			t.Errorf("%q: accepted", doc)
		}
	}
}

// TestDocumentsWithoutAliasesStayFarBelowTheBound: every YAML file of the
// repository's docs and examples (none with aliases) expands to at most
// twice its length, the margin the bounds are set with.
func TestDocumentsWithoutAliasesStayFarBelowTheBound(t *testing.T) {
	root := repodir.Root()
	n := 0
	for _, dir := range []string{"examples", "docs", filepath.Join("bootstrap", "kubeadm", "config")} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			size, err := yamlsize.Expanded(b, 1<<30)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			n++
			if size > 2*len(b)+16 {
				t.Errorf("%s: %d bytes expand to %d", path, len(b), size)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 10 {
		t.Fatalf("only %d YAML files measured", n)
	}
}

// FuzzExpanded builds documents from the input (scalars, sequences and
// mappings, anchors, aliases to earlier anchors, merge keys) and checks
// that what Check accepts decodes, with yaml.v3 expanding every alias, to no
// more than the bound says, and that what it refuses says why.
func FuzzExpanded(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5})
	f.Add([]byte{0, 0, 9, 9, 9, 9, 9, 9, 9, 9})
	f.Add([]byte{3, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7})
	f.Add([]byte{4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8})
	f.Add([]byte("0123456789abcdefghijklmnop"))
	const limit = 64 << 10
	f.Fuzz(func(t *testing.T, program []byte) {
		if len(program) == 0 {
			return
		}
		doc := hostile.AliasDocument(program)
		size, err := yamlsize.Expanded([]byte(doc), limit)
		var tooLarge *yamlsize.TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			return
		case err != nil:
			// A cycle or YAML the generator got wrong: yaml.v3 refuses it too.
			var v any
			if yaml.Unmarshal([]byte(doc), &v) == nil {
				t.Fatalf("refused (%v) a document yaml.v3 decodes:\n%s", err, doc)
			}
			return
		}
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			return // yaml.v3's own refusals (duplicate merge keys, say)
		}
		if got := decodedSize(v); got > size {
			t.Fatalf("measured %d bytes, but it decodes to %d:\n%s", size, got, doc)
		}
	})
}

// decodedSize is a decoded value's size as Check counts it.
func decodedSize(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 2
		for k, e := range v {
			n += len(k) + 2 + 1 + decodedSize(e) + 1
		}
		return n
	case []any:
		n := 2
		for _, e := range v {
			n += decodedSize(e) + 1
		}
		return n
	case string:
		return len(v) + 2
	}
	return 3 // null, a number or a boolean: at least one character as written
}
