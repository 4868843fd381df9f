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

package kubeadmconfig_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// observabilityPage is the operator's page on metrics, from this package.
const observabilityPage = "../../../../../docs/operator/observability.md"

// metricRow is a row of the page's metrics table: the metric and its labels.
var (
	metricRow  = regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([^|]*) \\|")
	labelNames = regexp.MustCompile("`([a-z_]+)`")
)

// TestObservabilityPageNamesExposedMetrics: every metric the operator's
// observability page lists is exposed by a manager that made a machine's
// data, with exactly the labels the page gives.
func TestObservabilityPageNamesExposedMetrics(t *testing.T) {
	page, err := os.ReadFile(observabilityPage)
	if err != nil {
		t.Fatal(err)
	}
	rows := metricRow.FindAllStringSubmatch(string(page), -1)
	if len(rows) == 0 {
		t.Fatal("the page lists no metric")
	}
	startManager(t)
	f := newRunningCluster(t)
	_, cfg := f.machine("metrics-worker", false, joinSpec(bootstrapv1.CloudConfig, false))
	f.waitForData(cfg)

	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string][]string{}
	for _, fam := range families {
		var labels []string
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		slices.Sort(labels)
		exposed[fam.GetName()] = labels
	}
	for _, row := range rows {
		name := row[1]
		var want []string
		for _, l := range labelNames.FindAllStringSubmatch(row[2], -1) {
			want = append(want, l[1])
		}
		slices.Sort(want)
		got, ok := exposed[name]
		switch {
		case !ok:
			t.Errorf("observability.md lists %s, which the manager does not expose", name)
		case !slices.Equal(got, want):
			t.Errorf("observability.md gives %s the labels [%s]; the manager's are [%s]", name, strings.Join(want, ", "), strings.Join(got, ", "))
		}
	}
}
