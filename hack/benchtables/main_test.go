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
	hasLines(t, text,
		"| 100 | ours | 2.0 s | 2.04 | 2.00 | 2646 | 1.00 | 1.00 | 0.49 | 11.6 | 336 |",
		"| 100 | upstream | 5.5 s | 12.61 | 10.11 | 7766 | 1.95 | 1.89 | 1.90 | 9.6 | 469 |",
		"One run of `docs/developer/bench/scale.txt`; cpu: Test CPU.",
	)
	if _, err := tableNamed(t, "renderers").markdown(rs); err == nil {
		t.Error("the renderers' table was written from an output without their benchmarks")
	}
}

// TestManyClusterTables reads the many-cluster runs' outputs and checks
// their cells and the sentences that compare their rows.
func TestManyClusterTables(t *testing.T) {
	clusters := `cpu: Test CPU
BenchmarkScaleClusters/shape=1x1000/impl=ours-2  	1	60000000000 ns/op	1000 configs	51.10 s-all-ready	50.00 s-floor	3.560 requests/config	3.550 writes/config	1.000 token-creates/config	1.000 tokens/config	23600 p50-ms	48100 p99-ms	48600 max-ms	17.10 heap-MB	90.00 rss-MB	369.0 goroutines	1.000 workload-conns	7.300 cpu-s	7.300 cpu-ms/config
BenchmarkScaleClusters/shape=1000x1/impl=ours-2  	1	30000000000 ns/op	1000 configs	19.60 s-all-ready	20.00 s-floor	5.080 requests/config	4.000 writes/config	0 token-creates/config	0 tokens/config	8500 p50-ms	13100 p99-ms	13200 max-ms	118.6 heap-MB	300.0 rss-MB	2369.0 goroutines	1000 workload-conns	7.200 cpu-s	7.200 cpu-ms/config	28.00 new-cluster-init-ms	1100 new-cluster-join-ms
`
	text := markdownOf(t, "clusters", "clusters.txt", clusters)
	hasLines(t, text,
		"| 1×1000 | ours | 51.1 s | 50.0 s | 23.6 s | 48.1 s | 48.6 s | 3.56 | 3.55 | 1.00 | 7.3 | 17.1 | 369 | 1 | — |",
		"| 1000×1 | ours | 19.6 s | 20.0 s | 8.50 s | 13.1 s | 13.2 s | 5.08 | 4.00 | 0.00 | 7.2 | 118.6 | 2369 | 1000 | 28.0 ms / 1.10 s |",
		"Per workload cluster, ours (1000×1 against 1×1000): 104 KiB of live heap, 2.00 goroutines, 1.00 connections.",
	)

	oneCluster := strings.ReplaceAll(clusters, "shape=1000x1", "shape=1x10000")
	text = markdownOf(t, "one-cluster", "one-cluster.txt", oneCluster)
	// 19.6 s for ten times the configs: 0.04 of the time per config.
	hasLines(t, text, "Per config, ours at 1×10000 against 1×1000 (1.00 is linear): time 0.04, requests 1.43, writes 1.13, CPU 0.99; all data in at 0.98× the floor.")

	arrival := `cpu: Test CPU
BenchmarkScaleArrival/clusters=1000/rate=10/impl=upstream-2  	1	300000000000 ns/op	3000 configs	300.0 s-all-ready	9.300 requests/config	8.140 writes/config	1.050 token-creates/config	1.050 tokens/config	2140 p50-ms	21100 p99-ms	24400 max-ms	138.0 heap-MB	351.0 rss-MB	2323 goroutines	1000 workload-conns	77.40 cpu-s	25.80 cpu-ms/config
`
	text = markdownOf(t, "arrival", "arrival.txt", arrival)
	hasLines(t, text, "| upstream | 1000 | 3000 | 10 | 2.14 s | 21.1 s | 24.4 s | 9.30 | 8.14 | 1.05 | 25.8 | 138.0 | 351 | 2323 |")
}

func hasLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, want := range lines {
		if !strings.Contains(text, want) {
			t.Errorf("table:\n%s\nhas no line %q", text, want)
		}
	}
}

func markdownOf(t *testing.T, table, file, output string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, []byte(output), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := read(path)
	if err != nil {
		t.Fatal(err)
	}
	text, err := tableNamed(t, table).markdown(rs)
	if err != nil {
		t.Fatal(err)
	}
	return text
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
