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
// `make test-e2e-capi` run, so the page quotes one run and nothing else;
// with -upgrades, the table of the run's Kubernetes upgrades instead (their
// report entries: time and what the availability probe saw); with
// -in-place, the table of its in-place updates (what the node watch saw).
//
//	go -C hack run ./e2eresults [-upgrades | -in-place] "$PWD/test/e2e/capi/_artifacts/report.json" "$PWD/docs/developer/e2e.md"
package main

import (
	"encoding/json"
	"flag"
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

// The markers around the generated parts of the page.
const (
	begin         = "<!-- Results of one make test-e2e-capi run, written by make e2e-capi-results. -->\n"
	end           = "<!-- End of the results. -->\n"
	upgradesBegin = "<!-- Upgrades of one make test-e2e-capi run, written by make e2e-capi-upgrade-results. -->\n"
	upgradesEnd   = "<!-- End of the upgrades. -->\n"
	inPlaceBegin  = "<!-- In-place updates of one make test-e2e-capi run, written by make e2e-capi-in-place-results. -->\n"
	inPlaceEnd    = "<!-- End of the in-place updates. -->\n"
)

func main() {
	upgradesOnly := flag.Bool("upgrades", false, "write the upgrades table instead of the results table")
	inPlaceOnly := flag.Bool("in-place", false, "write the in-place updates table instead of the results table")
	flag.Parse()
	if flag.NArg() != 2 || (*upgradesOnly && *inPlaceOnly) {
		fmt.Fprintln(os.Stderr, "usage: e2eresults [-upgrades | -in-place] REPORT.json PAGE.md")
		os.Exit(2)
	}
	section := sections[""]
	if *upgradesOnly {
		section = sections["upgrades"]
	}
	if *inPlaceOnly {
		section = sections["in-place"]
	}
	if err := run(flag.Arg(0), flag.Arg(1), section); err != nil {
		fmt.Fprintf(os.Stderr, "e2eresults: %v\n", err)
		os.Exit(1)
	}
}

// section is a generated part of the page: its markers and its text.
type section struct {
	begin, end string
	text       func(types.Report) (string, error)
}

var sections = map[string]section{
	"":         {begin, end, func(r types.Report) (string, error) { return results(r), nil }},
	"upgrades": {upgradesBegin, upgradesEnd, upgrades},
	"in-place": {inPlaceBegin, inPlaceEnd, inPlace},
}

func run(reportPath, pagePath string, sec section) error {
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
	text, err := sec.text(reports[0])
	if err != nil {
		return fmt.Errorf("%s: %w", reportPath, err)
	}
	out, err := pagesection.Replace(page, sec.begin, sec.end, text)
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

// upgradeEntry is the report entry each upgrade spec adds
// (test/e2e/capi's UpgradeResult).
const upgradeEntry = "upgrade"

type upgradeResult struct {
	Minutes              float64 `json:"minutes"`
	Requests             int     `json:"requests"`
	Failed               int     `json:"failed"`
	LongestOutageSeconds float64 `json:"longestOutageSeconds"`
}

// upgrades is the run's line and a table of its upgrades: spec, format,
// outcome, how long the upgrade took from the control plane's new version
// to every node ready, and the availability probe's failures meanwhile.
func upgrades(r types.Report) (string, error) {
	return entryTable(r, upgradeEntry, "| spec | format | outcome | upgrade | failed probe requests | longest outage |\n|---|---|---|---|---|---|\n",
		func(spec string, f bootstrapv1.Format, state types.SpecState, value []byte) (string, error) {
			var u upgradeResult
			if err := json.Unmarshal(value, &u); err != nil {
				return "", err
			}
			return fmt.Sprintf("| %s | %s | %s | %.1f min | %d of %d | %.0f s |\n",
				spec, f, state, u.Minutes, u.Failed, u.Requests, u.LongestOutageSeconds), nil
		})
}

// inPlaceEntry is the report entry each in-place update spec adds
// (test/e2e/capi's InPlaceResult).
const inPlaceEntry = "in-place"

type inPlaceResult struct {
	Updates        int     `json:"updates"`
	Machines       int     `json:"machines"`
	FastestSeconds float64 `json:"fastestSeconds"`
	SlowestSeconds float64 `json:"slowestSeconds"`
}

// inPlace is the run's line and a table of its in-place update specs:
// spec, format, outcome, how many changes on how many machines, and the
// fastest and slowest time from a change to the last host having it.
func inPlace(r types.Report) (string, error) {
	return entryTable(r, inPlaceEntry, "| spec | format | outcome | changes × machines | change to every host |\n|---|---|---|---|---|\n",
		func(spec string, f bootstrapv1.Format, state types.SpecState, value []byte) (string, error) {
			var u inPlaceResult
			if err := json.Unmarshal(value, &u); err != nil {
				return "", err
			}
			return fmt.Sprintf("| %s | %s | %s | %d × %d | %.0f–%.0f s |\n",
				spec, f, state, u.Updates, u.Machines, u.FastestSeconds, u.SlowestSeconds), nil
		})
}

// entryTable is the run's line and a table with a row per report entry of
// that name, made by row from the entry's JSON: specs in alphabetical
// order, formats in the order of the results table.
func entryTable(r types.Report, entry, header string, row func(spec string, f bootstrapv1.Format, state types.SpecState, value []byte) (string, error)) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` on this machine, %s, in %s.\n\n", command(r.SuiteConfig), r.StartTime.UTC().Format(time.DateOnly), minutes(r.RunTime))
	b.WriteString(header)
	type line struct {
		spec   string
		format bootstrapv1.Format
		text   string
	}
	var lines []line
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt || len(s.ContainerHierarchyTexts) < 2 {
			continue
		}
		for _, e := range s.ReportEntries {
			if e.Name != entry {
				continue
			}
			spec, f := specName(s.ContainerHierarchyTexts[0]), bootstrapv1.Format(s.ContainerHierarchyTexts[1])
			text, err := row(spec, f, s.State, []byte(e.Value.AsJSON))
			if err != nil {
				return "", fmt.Errorf("%s entry of %s: %w", entry, s.FullText(), err)
			}
			lines = append(lines, line{spec: spec, format: f, text: text})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int {
		if c := strings.Compare(a.spec, b.spec); c != 0 {
			return c
		}
		return slices.Index(bootstrapv1.Formats, a.format) - slices.Index(bootstrapv1.Formats, b.format)
	})
	for _, l := range lines {
		b.WriteString(l.text)
	}
	if len(lines) == 0 {
		return "", fmt.Errorf("no %q report entries in the run", entry)
	}
	return b.String(), nil
}

// command is how the run was made: specs run side by side finish sooner in
// all, and each takes longer.
func command(c types.SuiteConfig) string {
	cmd := "make test-e2e-capi"
	if c.LabelFilter != "" {
		cmd += fmt.Sprintf(" GINKGO_LABEL_FILTER='%s'", c.LabelFilter)
	}
	if c.ParallelTotal > 1 {
		cmd += fmt.Sprintf(" GINKGO_NODES=%d", c.ParallelTotal)
	}
	return cmd
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
