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

package pagesection

import (
	"strings"
	"testing"
)

func TestReplaceKeepsTheMarkersAndWhatIsAround(t *testing.T) {
	const begin, end = "<!-- begin -->\n", "<!-- end -->\n"
	page := "intro\n" + begin + "old\n" + end + "outro\n"
	got, err := Replace([]byte(page), begin, end, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + begin + "new\n" + end + "outro\n"; string(got) != want {
		t.Errorf("Replace = %q, want %q", got, want)
	}
	if _, err := Replace([]byte(strings.TrimSuffix(page, end+"outro\n")), begin, end, "new\n"); err == nil {
		t.Error("Replace accepted a page without the end marker")
	}
	if _, err := Replace([]byte("intro\n"), begin, end, "new\n"); err == nil {
		t.Error("Replace accepted a page without markers")
	}
}
