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
