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

package butane_test

import (
	"strings"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignition/butane"
)

// TestPositionsAreTheUsers: errors and warnings name lines of the document
// as the user wrote it, whether or not it gives variant and version (which
// the translator otherwise adds in front).
func TestPositionsAreTheUsers(t *testing.T) {
	const body = "storage:\n  files:\n  - path: /etc/x\n    mode: 644\n"
	header := "variant: " + butane.Variant + "\nversion: " + butane.Version + "\n"
	for name, tc := range map[string]struct {
		doc  string
		line string
	}{
		"without header": {body, "line 4"},
		"with header":    {header + body, "line 6"},
	} {
		_, warnings, err := butane.Translate(tc.doc, false)
		if err != nil || len(warnings) == 0 {
			t.Fatalf("%s: no warning for the decimal mode (%v)", name, err)
		}
		for _, w := range warnings {
			if !strings.Contains(w, tc.line) {
				t.Errorf("%s: warning %q, want it at %s", name, w, tc.line)
			}
		}
		_, _, err = butane.Translate(tc.doc, true)
		if err == nil || !strings.Contains(err.Error(), tc.line) || strings.Contains(err.Error(), "line 2 ") {
			t.Errorf("%s, strict: error %v, want it at %s only", name, err, tc.line)
		}
	}
	// A document that is not YAML: the position is the user's too.
	const broken = "storage:\n  files:\n  - path: /etc/x\n   mode: 0644\n"
	for name, tc := range map[string]struct {
		doc  string
		line string
	}{
		"without header": {broken, "line 1"},
		"with header":    {header + broken, "line 3"},
	} {
		_, _, err := butane.Translate(tc.doc, false)
		if err == nil || !strings.Contains(err.Error(), tc.line) {
			t.Errorf("%s: error %v, want one at %s", name, err, tc.line)
		}
	}
}
