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
	"fmt"
	"math"
	"strconv"
	"strings"
)

// tables are the page's generated tables, in the page's order.
var tables = []table{
	{
		name: "renderers", file: "renderers.txt",
		header: []string{"format", "size", "action", "ours", "upstream", "ours faster", "B/op ours / upstream", "allocs/op ours / upstream", "output ours / upstream"},
		rows: func(m *medians) [][]string {
			return append(sideBySide(m, "cloud-config", "CloudInit"), sideBySide(m, "ignition", "Ignition")...)
		},
	},
	{
		name: "raw", file: "renderers.txt",
		header: []string{"action", "raw", "copy of its output", "ratio", "output"},
		rows:   rawRows,
	},
	{
		name: "plan", file: "renderers.txt",
		header: []string{"size", "action", "time", "B/op", "allocs/op"},
		rows:   func(m *medians) [][]string { return costRows(m, "Plan/") },
	},
	{
		name: "butane", file: "renderers.txt",
		header: []string{"size", "action", "time", "B/op", "allocs/op"},
		rows:   func(m *medians) [][]string { return costRows(m, "IgnitionButane/impl=ours/") },
	},
	{
		name: "scale", file: "scale.txt",
		header: []string{"N", "impl", "all data in", "requests / config", "writes / config", "bytes written / config", "token creates / config", "tokens left / config", "CPU s", "heap MB", "goroutines"},
		rows:   scaleRows,
	},
}

// sideBySide is a renderer's rows: each size and action, ours beside
// upstream's.
func sideBySide(m *medians, format, bench string) [][]string {
	var rows [][]string
	for _, rest := range m.results.withPrefix(bench + "/impl=ours/") {
		ours, upstream := bench+"/impl=ours/"+rest, bench+"/impl=upstream/"+rest
		t, ut := m.of(ours, "ns/op"), m.of(upstream, "ns/op")
		rows = append(rows, append(append([]string{format}, keyValues(rest)...),
			duration(t), duration(ut), ratio(ut/t),
			size(m.of(ours, "B/op"))+" / "+size(m.of(upstream, "B/op")),
			count(m.of(ours, "allocs/op"))+" / "+count(m.of(upstream, "allocs/op")),
			size(m.of(ours, "out-bytes/op"))+" / "+size(m.of(upstream, "out-bytes/op")),
		))
	}
	return rows
}

// rawRows set raw beside its yardstick, copying its output.
func rawRows(m *medians) [][]string {
	var rows [][]string
	for _, rest := range m.results.withPrefix("Raw/impl=ours/") {
		t, c := m.of("Raw/impl=ours/"+rest, "ns/op"), m.of("Raw/impl=copy/"+rest, "ns/op")
		rows = append(rows, append(keyValues(rest), duration(t), duration(c), ratio(t/c), size(m.of("Raw/impl=ours/"+rest, "out-bytes/op"))))
	}
	return rows
}

// costRows are a benchmark's time and allocations per sub-benchmark.
func costRows(m *medians, prefix string) [][]string {
	var rows [][]string
	for _, rest := range m.results.withPrefix(prefix) {
		name := prefix + rest
		rows = append(rows, append(keyValues(rest), duration(m.of(name, "ns/op")), size(m.of(name, "B/op")), count(m.of(name, "allocs/op"))))
	}
	return rows
}

// scaleRows are each size's run, this manager's then upstream's.
func scaleRows(m *medians) [][]string {
	var rows [][]string
	for _, rest := range m.results.withPrefix("Scale/") {
		name := "Scale/" + rest
		kv := keyValues(rest) // n, impl
		n, err := strconv.Atoi(kv[0])
		if err != nil {
			m.err = fmt.Errorf("%s: n is not a number", name)
			return nil
		}
		rows = append(rows, append(kv,
			seconds(m.of(name, "ms/config")*float64(n)/1000),
			fixed(m.of(name, "requests/config")), fixed(m.of(name, "writes/config")),
			count(m.of(name, "bytes-written/config")),
			fixed(m.of(name, "token-creates/config")), fixed(m.of(name, "tokens/config")),
			fixed(m.of(name, "cpu-s")), fmt.Sprintf("%.1f", m.of(name, "heap-MB")), count(m.of(name, "goroutines")),
		))
	}
	return rows
}

// keyValues are the values of a sub-benchmark name's key=value parts.
func keyValues(rest string) []string {
	var out []string
	for _, part := range strings.Split(rest, "/") {
		_, v, _ := strings.Cut(part, "=")
		out = append(out, v)
	}
	return out
}

// duration writes nanoseconds with three significant digits in the unit
// that keeps them short.
func duration(ns float64) string {
	switch {
	case ns < 1e3:
		return significant(ns) + " ns"
	case ns < 1e6:
		return significant(ns/1e3) + " µs"
	case ns < 1e9:
		return significant(ns/1e6) + " ms"
	}
	return significant(ns/1e9) + " s"
}

func seconds(s float64) string { return fmt.Sprintf("%.1f s", s) }

// significant writes v with three significant digits, no exponent.
func significant(v float64) string {
	if v <= 0 {
		return "0"
	}
	decimals := max(0, 2-int(math.Floor(math.Log10(v))))
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

func size(b float64) string {
	if b < 1024 {
		return fmt.Sprintf("%.0f B", b)
	}
	return significant(b/1024) + " KiB"
}

func ratio(r float64) string { return fmt.Sprintf("%.1f×", r) }

func fixed(v float64) string { return fmt.Sprintf("%.2f", v) }

func count(v float64) string { return fmt.Sprintf("%.0f", v) }
