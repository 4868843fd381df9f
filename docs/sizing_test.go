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

package docs_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

var (
	// sizingRow is a row of the sizing table whose last cell names flags.
	sizingRow = regexp.MustCompile("(?m)^\\| [^|]+ \\| ([^|]+) \\| (`--[^|]+) \\|$")
	flagName  = regexp.MustCompile("`(--[a-z0-9-]+)`")
	number    = regexp.MustCompile(`[0-9]+`)
	// flagDefault is a flag's line in the manager's --help.
	flagDefault = regexp.MustCompile(`(?m)^\s+(--[a-z0-9-]+) \S+ .*\(default ([^)]+)\)$`)
)

// TestSizingDefaultsAreTheManagers: each default the operator's sizing page
// gives for a manager flag is the default the manager's --help prints.
func TestSizingDefaultsAreTheManagers(t *testing.T) {
	out, err := exec.Command("go", "run", "../bootstrap/kubeadm/cmd/manager", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("manager --help: %v\n%s", err, out)
	}
	defaults := map[string]string{}
	for _, m := range flagDefault.FindAllStringSubmatch(string(out), -1) {
		defaults[m[1]] = m[2]
	}
	rows := sizingRow.FindAllStringSubmatch(read(t, "docs/operator/sizing.md"), -1)
	if len(rows) == 0 {
		t.Fatal("no row of the sizing table names a flag")
	}
	for _, row := range rows {
		flags := flagName.FindAllStringSubmatch(row[2], -1)
		values := number.FindAllString(row[1], -1)
		if len(values) != len(flags) {
			t.Errorf("sizing.md: %q gives %d numbers for %d flags", strings.TrimSpace(row[1]), len(values), len(flags))
			continue
		}
		for i, f := range flags {
			if got := defaults[f[1]]; got != values[i] {
				t.Errorf("sizing.md says %s defaults to %s; the manager's default is %q", f[1], values[i], got)
			}
		}
	}
}
