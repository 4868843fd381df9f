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

// Command e2eresults writes the results table of Cluster API's specs in
// docs/developer/e2e.md from the Ginkgo JSON report of one
// `make test-e2e-capi` run, so the page quotes one run and nothing else.
//
//	go run ./hack/e2eresults test/e2e/capi/_artifacts/report.json docs/developer/e2e.md
package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/hack/internal/pagesection"
)

// The markers around the generated part of the page.
const (
	begin = "<!-- Results of one make test-e2e-capi run, written by make e2e-capi-results. -->\n"
	end   = "<!-- End of the results. -->\n"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: e2eresults REPORT.json PAGE.md")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "e2eresults: %v\n", err)
		os.Exit(1)
	}
}

func run(reportPath, pagePath string) error {
	b, err := os.ReadFile(reportPath)
	if err != nil {
		return err
	}
	var reports []types.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		return fmt.Errorf("%s: %w", reportPath, err)
	}
	if len(reports) != 1 {
		return fmt.Errorf("%s: %d suites, want one", reportPath, len(reports))
	}
	page, err := os.ReadFile(pagePath)
	if err != nil {
		return err
	}
	out, err := pagesection.Replace(page, begin, end, results(reports[0]))
	if err != nil {
		return fmt.Errorf("%s: %w", pagePath, err)
	}
	return os.WriteFile(pagePath, out, 0o644)
}

// cell is one spec in one format: its state and how long its nodes ran.
type cell struct {
	state   types.SpecState
	runTime time.Duration
}

// results is the run's summary line and a table of spec × format, specs
// in alphabetical order.
func results(r types.Report) string {
	cells := map[string]map[bootstrapv1.Format]cell{}
	count := map[string]int{}
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt || len(s.ContainerHierarchyTexts) < 2 {
			continue
		}
		spec, f := specName(s.ContainerHierarchyTexts[0]), bootstrapv1.Format(s.ContainerHierarchyTexts[1])
		if cells[spec] == nil {
			cells[spec] = map[bootstrapv1.Format]cell{}
		}
		c := cells[spec][f]
		c.state = worst(c.state, s.State)
		c.runTime += s.RunTime
		cells[spec][f] = c
		count[outcome(s.State)]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` on this machine, %s, in %s: passed %d, failed %d, not run %d.\n\n",
		command(r.SuiteConfig), r.StartTime.UTC().Format(time.DateOnly), minutes(r.RunTime),
		count["passed"], count["failed"], count["not run"])
	b.WriteString("| spec |")
	for _, f := range bootstrapv1.Formats {
		fmt.Fprintf(&b, " %s |", f)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(bootstrapv1.Formats)) + "\n")
	for _, spec := range slices.Sorted(maps.Keys(cells)) {
		fmt.Fprintf(&b, "| %s |", spec)
		for _, f := range bootstrapv1.Formats {
			c, declared := cells[spec][f]
			fmt.Fprintf(&b, " %s |", cellText(c, declared))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// command is how the run was made: specs run side by side finish sooner in
// all, and each takes longer.
func command(c types.SuiteConfig) string {
	if c.ParallelTotal > 1 {
		return fmt.Sprintf("make test-e2e-capi GINKGO_NODES=%d", c.ParallelTotal)
	}
	return "make test-e2e-capi"
}

// outcome is how the summary line counts a spec's state.
func outcome(s types.SpecState) string {
	switch s {
	case types.SpecStatePassed:
		return "passed"
	case types.SpecStateSkipped, types.SpecStatePending:
		return "not run"
	default:
		return "failed"
	}
}

// specName is the Describe text without the suite's common prefix.
func specName(describe string) string {
	name := strings.TrimPrefix(describe, "Cluster API's ")
	return strings.ToUpper(name[:1]) + name[1:]
}

// worst keeps a failure over a pass and a pass over a skip, so that a
// spec of several nodes shows its worst node.
func worst(a, b types.SpecState) types.SpecState {
	rank := func(s types.SpecState) int {
		switch s {
		case types.SpecStateInvalid:
			return 0
		case types.SpecStateSkipped, types.SpecStatePending:
			return 1
		case types.SpecStatePassed:
			return 2
		default:
			return 3
		}
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

func cellText(c cell, declared bool) string {
	switch {
	case !declared:
		return "not admitted"
	case outcome(c.state) == "not run":
		return "not run"
	default:
		return c.state.String() + ", " + minutes(c.runTime)
	}
}

func minutes(d time.Duration) string { return fmt.Sprintf("%.1f min", d.Minutes()) }
