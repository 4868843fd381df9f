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
	"os"
	"strings"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
)

// TestFormatsDocIsCurrent: docs/reference/fields.md is what the template and the
// table make (make verify-generate checks it too), and names every field of
// the table.
func TestFormatsDocIsCurrent(t *testing.T) {
	got, err := os.ReadFile("../../docs/reference/fields.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("docs/reference/fields.md is stale: run make generate")
	}
	for _, r := range fieldrules.Rules {
		if !strings.Contains(string(got), "`"+r.Field+"`") {
			t.Errorf("docs lack %s", r.Field)
		}
	}
}
