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

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedTablesAreCurrent rewrites the page's tables from the
// committed outputs: the page must already say exactly that.
func TestCommittedTablesAreCurrent(t *testing.T) {
	const page = "../../docs/developer/performance.md"
	committed, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	got, err := write("../../docs/developer/bench", committed)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(committed) {
		t.Errorf("%s does not match docs/developer/bench: run make bench-tables", page)
	}
}

// TestTablesFromAnOutput reads a small output as go test writes it, log
// lines included, and checks the cells computed from it.
func TestTablesFromAnOutput(t *testing.T) {
	output := `goos: linux
goarch: amd64
pkg: example
cpu: Test CPU
BenchmarkScale/n=100/impl=ours-2         	       1	2000000000 ns/op	        20.00 ms/config	 2.040 requests/config	 2.000 writes/config	 2646 bytes-written/config	 1.000 tokens/config	 1.000 token-creates/config	 11.60 heap-MB	 336.0 goroutines	 0.4900 cpu-s
    scale_test.go:160: ours, n=100: all ready after 2s; management API requests per config:
          create secrets   1.000
BenchmarkScale/n=100/impl=upstream-2     	       1	5000000000 ns/op	        55.40 ms/config	 12.61 requests/config	 10.11 writes/config	 7766 bytes-written/config	 1.890 tokens/config	 1.950 token-creates/config	 9.600 heap-MB	 469.0 goroutines	 1.900 cpu-s
PASS
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "scale.txt"), []byte(output), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := read(filepath.Join(dir, "scale.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text, err := tableNamed(t, "scale").markdown(rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 100 | ours | 2.0 s | 2.04 | 2.00 | 2646 | 1.00 | 1.00 | 0.49 | 11.6 | 336 |",
		"| 100 | upstream | 5.5 s | 12.61 | 10.11 | 7766 | 1.95 | 1.89 | 1.90 | 9.6 | 469 |",
		"One run of `docs/developer/bench/scale.txt`; cpu: Test CPU.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table:\n%s\nhas no line %q", text, want)
		}
	}
	if _, err := tableNamed(t, "renderers").markdown(rs); err == nil {
		t.Error("the renderers' table was written from an output without their benchmarks")
	}
}

func TestDurationsKeepThreeSignificantDigits(t *testing.T) {
	for ns, want := range map[float64]string{
		313:     "313 ns",
		4300:    "4.30 µs",
		21600:   "21.6 µs",
		539000:  "539 µs",
		1272000: "1.27 ms",
		9.9e9:   "9.90 s",
	} {
		if got := duration(ns); got != want {
			t.Errorf("duration(%v) = %q, want %q", ns, got, want)
		}
	}
}

func tableNamed(t *testing.T, name string) table {
	t.Helper()
	for _, tb := range tables {
		if tb.name == name {
			return tb
		}
	}
	t.Fatalf("no table %s", name)
	return table{}
}
