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

// Command benchtables writes the tables of docs/developer/performance.md from
// the benchmark outputs that `make bench` and `make bench-scale` commit in
// docs/developer/bench, so every figure on the page comes from one run's
// output and nothing else. Each table sits between marker lines naming it.
//
//	go -C hack run ./benchtables "$PWD/docs/developer/bench" "$PWD/docs/developer/performance.md"
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/hack/internal/pagesection"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: benchtables BENCH-DIR PAGE.md")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "benchtables: %v\n", err)
		os.Exit(1)
	}
}

func run(dir, pagePath string) error {
	page, err := os.ReadFile(pagePath)
	if err != nil {
		return err
	}
	out, err := write(dir, page)
	if err != nil {
		return err
	}
	return os.WriteFile(pagePath, out, 0o644)
}

// write returns page with every table rewritten from the outputs in dir.
func write(dir string, page []byte) ([]byte, error) {
	outputs := map[string]*results{}
	for _, t := range tables {
		rs, ok := outputs[t.file]
		if !ok {
			var err error
			if rs, err = read(filepath.Join(dir, t.file)); err != nil {
				return nil, err
			}
			outputs[t.file] = rs
		}
		text, err := t.markdown(rs)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.name, err)
		}
		if page, err = pagesection.Replace(page, t.begin(), t.end(), text); err != nil {
			return nil, err
		}
	}
	return page, nil
}

// table is one generated table: the output it reads, its header, and how
// its rows come from the measurements.
type table struct {
	name   string
	file   string
	header []string
	rows   func(m *medians) [][]string
	// notes, when set, are sentences under the table that compare its
	// rows.
	notes func(m *medians) []string
}

func (t table) begin() string {
	return fmt.Sprintf("<!-- Table %s, written by make bench-tables from docs/developer/bench/%s. -->\n", t.name, t.file)
}

func (t table) end() string { return fmt.Sprintf("<!-- End of table %s. -->\n", t.name) }

func (t table) markdown(rs *results) (string, error) {
	m := &medians{results: rs}
	rows := t.rows(m)
	if m.err != nil {
		return "", m.err
	}
	if len(rows) == 0 {
		return "", fmt.Errorf("%s has none of its benchmarks", rs.file)
	}
	var b strings.Builder
	writeRow(&b, t.header)
	seps := make([]string, len(t.header))
	for i := range seps {
		seps[i] = "---"
	}
	writeRow(&b, seps)
	for _, r := range rows {
		writeRow(&b, r)
	}
	if t.notes != nil {
		notes := t.notes(m)
		if m.err != nil {
			return "", m.err
		}
		for _, n := range notes {
			b.WriteString("\n" + n + "\n")
		}
	}
	fmt.Fprintf(&b, "\n%s of %s; cpu: %s.\n", m.summary(), "`docs/developer/bench/"+t.file+"`", rs.cpu)
	return b.String(), nil
}

func writeRow(b *strings.Builder, cells []string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}
