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

// Package moduledir finds Go modules' source in the module cache, for tests
// that read other projects' files as a corpus.
package moduledir

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"
)

// Of returns the directory of a Go module's source, for tests that
// read other projects' files (templates, test data, docs) as a corpus. With
// a version, the module is downloaded through the Go module proxy into the
// module cache (outside this module, whose go.mod stays as it is); without
// one, it is the version this module builds with.
func Of(t testing.TB, module, version string) string {
	t.Helper()
	var cmd *exec.Cmd
	if version == "" {
		cmd = exec.Command("go", "list", "-m", "-json", module)
	} else {
		cmd = exec.Command("go", "mod", "download", "-json", module+"@"+version)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("%s: no module directory: %s %v", cmd, info.Error, err)
	}
	return info.Dir
}
