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
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func spec(describe, format string, state types.SpecState, minutes float64) types.SpecReport {
	return types.SpecReport{
		ContainerHierarchyTexts: []string{describe, format},
		LeafNodeType:            types.NodeTypeIt,
		State:                   state,
		RunTime:                 time.Duration(minutes * float64(time.Minute)),
	}
}

func TestResultsTable(t *testing.T) {
	report := types.Report{
		StartTime: time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC),
		RunTime:   10 * time.Minute,
		SpecReports: types.SpecReports{
			{LeafNodeType: types.NodeTypeBeforeSuite, State: types.SpecStatePassed},
			spec("Cluster API's quick start", "cloud-config", types.SpecStatePassed, 4.6),
			spec("Cluster API's quick start", "ignition", types.SpecStateFailed, 2),
			spec("Cluster API's quick start", "raw", types.SpecStateSkipped, 0),
			spec("Cluster API's KCP remediation", "cloud-config", types.SpecStatePassed, 1),
		},
	}
	got := results(report)
	want := "`make test-e2e-capi` on this machine, 2026-12-05, in 10.0 min: passed 2, failed 1, not run 1.\n\n" +
		"| spec | cloud-config | ignition | raw |\n|---|---|---|---|\n" +
		"| KCP remediation | passed, 1.0 min | not admitted | not admitted |\n" +
		"| Quick start | passed, 4.6 min | failed, 2.0 min | not run |\n"
	if got != want {
		t.Errorf("results:\n%s\nwant:\n%s", got, want)
	}

	report.SuiteConfig.ParallelTotal = 3
	if got, want := results(report), "`make test-e2e-capi GINKGO_NODES=3` on this machine,"; !strings.HasPrefix(got, want) {
		t.Errorf("results of a parallel run start %q, want %q", got[:len(want)], want)
	}
}

func TestUpgradesTable(t *testing.T) {
	upgraded := spec("Cluster API's cluster upgrade", "ignition", types.SpecStatePassed, 12)
	upgraded.ReportEntries = types.ReportEntries{
		{Name: "other", Value: types.WrapEntryValue(1)},
		{Name: upgradeEntry, Value: types.WrapEntryValue(upgradeResult{Minutes: 8.26, Requests: 496, Failed: 3, LongestOutageSeconds: 2})},
	}
	report := types.Report{
		StartTime:   time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC),
		RunTime:     30 * time.Minute,
		SuiteConfig: types.SuiteConfig{LabelFilter: "K8s-Upgrade"},
		SpecReports: types.SpecReports{upgraded, spec("Cluster API's quick start", "raw", types.SpecStatePassed, 4)},
	}
	// As make test-e2e-capi writes it and e2eresults reads it.
	b, err := json.Marshal(report)
	if err != nil {
		t.Fatal(err)
	}
	var read types.Report
	if err := json.Unmarshal(b, &read); err != nil {
		t.Fatal(err)
	}
	got, err := upgrades(read)
	if err != nil {
		t.Fatal(err)
	}
	want := "`make test-e2e-capi GINKGO_LABEL_FILTER='K8s-Upgrade'` on this machine, 2026-12-06, in 30.0 min.\n\n" +
		"| spec | format | outcome | upgrade | failed probe requests | longest outage |\n|---|---|---|---|---|---|\n" +
		"| Cluster upgrade | ignition | passed | 8.3 min | 3 of 496 | 2 s |\n"
	if got != want {
		t.Errorf("upgrades:\n%s\nwant:\n%s", got, want)
	}
	if _, err := upgrades(types.Report{SpecReports: types.SpecReports{spec("Cluster API's quick start", "raw", types.SpecStatePassed, 4)}}); err == nil {
		t.Error("a run without upgrades: no error")
	}
}

func TestInPlaceTable(t *testing.T) {
	updated := spec("Cluster API's in-place update", "raw", types.SpecStatePassed, 9)
	updated.ReportEntries = types.ReportEntries{
		{Name: inPlaceEntry, Value: types.WrapEntryValue(inPlaceResult{Updates: 5, Machines: 4, FastestSeconds: 21.4, SlowestSeconds: 170.6})},
	}
	cloudConfig := spec("Cluster API's in-place update", "cloud-config", types.SpecStatePassed, 8)
	cloudConfig.ReportEntries = types.ReportEntries{
		{Name: inPlaceEntry, Value: types.WrapEntryValue(inPlaceResult{Updates: 5, Machines: 4, FastestSeconds: 30, SlowestSeconds: 31})},
	}
	b, err := json.Marshal(types.Report{
		StartTime: time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC), RunTime: 20 * time.Minute,
		SpecReports: types.SpecReports{updated, cloudConfig},
	})
	if err != nil {
		t.Fatal(err)
	}
	var read types.Report
	if err := json.Unmarshal(b, &read); err != nil {
		t.Fatal(err)
	}
	got, err := inPlace(read)
	if err != nil {
		t.Fatal(err)
	}
	want := "`make test-e2e-capi` on this machine, 2026-12-07, in 20.0 min.\n\n" +
		"| spec | format | outcome | changes × machines | change to every host |\n|---|---|---|---|---|\n" +
		"| In-place update | cloud-config | passed | 5 × 4 | 30–31 s |\n" +
		"| In-place update | raw | passed | 5 × 4 | 21–171 s |\n"
	if got != want {
		t.Errorf("in-place:\n%s\nwant:\n%s", got, want)
	}
}
