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
	{
		name: "clusters", file: "clusters.txt",
		header: []string{"shape C×M", "impl", "all data in", "floor", "p50", "p99", "max", "requests / config", "writes / config", "token creates / config", "CPU ms / config", "heap MB", "goroutines", "workload conns", "new cluster: init / join"},
		rows:   clustersRows,
		notes:  perWorkloadCluster,
	},
	{
		name: "arrival", file: "arrival.txt",
		header: []string{"impl", "clusters", "machines", "a second", "p50", "p99", "max", "requests / config", "writes / config", "token creates / config", "CPU ms / config", "heap MB", "RSS MB", "goroutines"},
		rows:   arrivalRows,
	},
	{
		name: "one-cluster", file: "one-cluster.txt",
		header: []string{"shape C×M", "impl", "all data in", "floor", "p50", "p99", "requests / config", "writes / config", "CPU ms / config", "heap MB", "RSS MB"},
		rows:   oneClusterRows,
		notes:  perConfigGrowth,
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

// clusterRuns are a many-cluster output's runs, in its order.
func clusterRuns(m *medians) []clusterRun {
	var runs []clusterRun
	for _, rest := range m.results.withPrefix("ScaleClusters/") {
		kv := keyValues(rest) // shape, impl
		r := clusterRun{name: "ScaleClusters/" + rest, impl: kv[1]}
		if _, err := fmt.Sscanf(kv[0], "%dx%d", &r.clusters, &r.machines); err != nil {
			m.err = fmt.Errorf("%s: the shape is not CxM", r.name)
			return nil
		}
		runs = append(runs, r)
	}
	return runs
}

// clusterRun is one implementation's run of one shape: C clusters of M
// machines.
type clusterRun struct {
	name               string
	impl               string
	clusters, machines int
}

func (r clusterRun) shape() string { return fmt.Sprintf("%d×%d", r.clusters, r.machines) }

// clustersRows are the burst's runs, each shape's implementations in turn.
func clustersRows(m *medians) [][]string {
	var rows [][]string
	for _, r := range clusterRuns(m) {
		newCluster := "—"
		if init, ok := m.optional(r.name, "new-cluster-init-ms"); ok {
			newCluster = duration(init*1e6) + " / " + duration(m.of(r.name, "new-cluster-join-ms")*1e6)
		}
		rows = append(rows, []string{
			r.shape(), r.impl, seconds(m.of(r.name, "s-all-ready")), seconds(m.of(r.name, "s-floor")),
			duration(m.of(r.name, "p50-ms") * 1e6), duration(m.of(r.name, "p99-ms") * 1e6), duration(m.of(r.name, "max-ms") * 1e6),
			fixed(m.of(r.name, "requests/config")), fixed(m.of(r.name, "writes/config")), fixed(m.of(r.name, "token-creates/config")),
			fmt.Sprintf("%.1f", m.of(r.name, "cpu-ms/config")), fmt.Sprintf("%.1f", m.of(r.name, "heap-MB")),
			count(m.of(r.name, "goroutines")), count(m.of(r.name, "workload-conns")), newCluster,
		})
	}
	return rows
}

// perWorkloadCluster compares one cluster of N machines with N clusters of
// one: what each more workload cluster costs the manager.
func perWorkloadCluster(m *medians) []string {
	var notes []string
	for _, p := range pairs(m, func(x, y clusterRun) bool {
		return x.clusters == 1 && y.machines == 1 && y.clusters == x.machines && y.clusters > 1
	}) {
		x, y := p[0], p[1]
		extra := float64(y.clusters - x.clusters)
		per := func(unit string) float64 { return (m.of(y.name, unit) - m.of(x.name, unit)) / extra }
		notes = append(notes, fmt.Sprintf("Per workload cluster, %s (%s against %s): %s of live heap, %.2f goroutines, %.2f connections.",
			x.impl, y.shape(), x.shape(), size(per("heap-MB")*1024*1024), per("goroutines"), per("workload-conns")))
	}
	return notes
}

// pairs are the pairs of one implementation's runs that keep takes, in
// the output's order.
func pairs(m *medians, keep func(x, y clusterRun) bool) [][2]clusterRun {
	var out [][2]clusterRun
	runs := clusterRuns(m)
	for _, x := range runs {
		for _, y := range runs {
			if x.impl == y.impl && keep(x, y) {
				out = append(out, [2]clusterRun{x, y})
			}
		}
	}
	return out
}

// arrivalRows are the steady arrival's runs.
func arrivalRows(m *medians) [][]string {
	var rows [][]string
	for _, rest := range m.results.withPrefix("ScaleArrival/") {
		name := "ScaleArrival/" + rest
		kv := keyValues(rest) // clusters, rate, impl
		rows = append(rows, []string{
			kv[2], kv[0], count(m.of(name, "configs")), kv[1],
			duration(m.of(name, "p50-ms") * 1e6), duration(m.of(name, "p99-ms") * 1e6), duration(m.of(name, "max-ms") * 1e6),
			fixed(m.of(name, "requests/config")), fixed(m.of(name, "writes/config")), fixed(m.of(name, "token-creates/config")),
			fmt.Sprintf("%.1f", m.of(name, "cpu-ms/config")), fmt.Sprintf("%.1f", m.of(name, "heap-MB")),
			count(m.of(name, "rss-MB")), count(m.of(name, "goroutines")),
		})
	}
	return rows
}

// oneClusterRows are the runs of one cluster of growing size.
func oneClusterRows(m *medians) [][]string {
	var rows [][]string
	for _, r := range clusterRuns(m) {
		rows = append(rows, []string{
			r.shape(), r.impl, seconds(m.of(r.name, "s-all-ready")), seconds(m.of(r.name, "s-floor")),
			duration(m.of(r.name, "p50-ms") * 1e6), duration(m.of(r.name, "p99-ms") * 1e6),
			fixed(m.of(r.name, "requests/config")), fixed(m.of(r.name, "writes/config")),
			fmt.Sprintf("%.1f", m.of(r.name, "cpu-ms/config")), fmt.Sprintf("%.1f", m.of(r.name, "heap-MB")), count(m.of(r.name, "rss-MB")),
		})
	}
	return rows
}

// perConfigGrowth compares one cluster's runs of different sizes: how
// each cost per config grows with the machines (1.00 is linear).
func perConfigGrowth(m *medians) []string {
	var notes []string
	for _, p := range pairs(m, func(x, y clusterRun) bool {
		return x.clusters == 1 && y.clusters == 1 && y.machines > x.machines
	}) {
		x, y := p[0], p[1]
		growth := func(unit string) float64 { return m.of(y.name, unit) / m.of(x.name, unit) }
		timeGrowth := growth("s-all-ready") * float64(x.machines) / float64(y.machines)
		notes = append(notes, fmt.Sprintf("Per config, %s at %s against %s (1.00 is linear): time %.2f, requests %.2f, writes %.2f, CPU %.2f; all data in at %.2f× the floor.",
			x.impl, y.shape(), x.shape(), timeGrowth, growth("requests/config"), growth("writes/config"), growth("cpu-ms/config"),
			m.of(y.name, "s-all-ready")/m.of(y.name, "s-floor")))
	}
	return notes
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
