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
	"os"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// results are one benchmark output's measurements: each benchmark's values
// per unit over its runs, by name (as the reader gives it, without
// "Benchmark", and without the GOMAXPROCS suffix), in the order the output
// first names them.
type results struct {
	file   string
	cpu    string
	names  []string
	values map[string]map[string][]float64
}

// read parses a `go test -bench` output with the benchmark format's own
// reader; log lines between the results are not results and are skipped.
func read(path string) (*results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rs := &results{file: path, values: map[string]map[string][]float64{}}
	r := benchfmt.NewReader(f, path)
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.SyntaxError:
			return nil, rec
		case *benchfmt.Result:
			rs.add(rec)
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if len(rs.names) == 0 {
		return nil, fmt.Errorf("%s: no benchmark results", path)
	}
	return rs, nil
}

func (rs *results) add(rec *benchfmt.Result) {
	if cpu := strings.TrimSpace(rec.GetConfig("cpu")); cpu != "" {
		rs.cpu = cpu
	}
	base, parts := rec.Name.Parts()
	name := string(base)
	for _, p := range parts {
		if !strings.HasPrefix(string(p), "-") { // -N is GOMAXPROCS
			name += string(p)
		}
	}
	units, ok := rs.values[name]
	if !ok {
		units = map[string][]float64{}
		rs.values[name] = units
		rs.names = append(rs.names, name)
	}
	for _, v := range rec.Values {
		// The units as the benchmark wrote them: the reader's tidying
		// would turn heap-MB into heap-B.
		unit, value := v.OrigUnit, v.OrigValue
		if unit == "" {
			unit, value = v.Unit, v.Value
		}
		units[unit] = append(units[unit], value)
	}
}

// withPrefix returns the rest of every name that starts with prefix, in
// the output's order.
func (rs *results) withPrefix(prefix string) []string {
	var out []string
	for _, n := range rs.names {
		if rest, ok := strings.CutPrefix(n, prefix); ok {
			out = append(out, rest)
		}
	}
	return out
}

// medians reads the median of each measurement, as benchstat summarises a
// sample, and keeps the first missing one as its error so that a table's
// rows read as a list of cells.
type medians struct {
	results *results
	runs    int
	err     error
}

func (m *medians) of(name, unit string) float64 {
	values := m.results.values[name][unit]
	if len(values) == 0 {
		if m.err == nil {
			m.err = fmt.Errorf("%s: no %s for %s", m.results.file, unit, name)
		}
		return 0
	}
	if m.runs == 0 || len(values) < m.runs {
		m.runs = len(values)
	}
	sample := benchmath.NewSample(values, &benchmath.DefaultThresholds)
	return benchmath.AssumeNothing.Summary(sample, 0.95).Center
}

// optional reads a measurement that some runs do not report.
func (m *medians) optional(name, unit string) (float64, bool) {
	if len(m.results.values[name][unit]) == 0 {
		return 0, false
	}
	return m.of(name, unit), true
}

// summary says what the cells are: one run's values or medians.
func (m *medians) summary() string {
	if m.runs <= 1 {
		return "One run"
	}
	return fmt.Sprintf("Medians of %d runs", m.runs)
}
