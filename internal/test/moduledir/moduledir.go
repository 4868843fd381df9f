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
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
)

// Of returns the directory of a Go module's source, for tests that
// read other projects' files (templates, test data, docs) as a corpus. With
// a version, the module is downloaded through the Go module proxy into the
// module cache (outside this module, whose go.mod stays as it is); without
// one, it is the version this module builds with.
func Of(t testing.TB, module, version string) string {
	t.Helper()
	dir, err := Dir(module, version)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Dir is Of outside a test.
func Dir(module, version string) (string, error) {
	var cmd *exec.Cmd
	if version == "" {
		// Download, not list: go list names no directory for a module the
		// cache does not hold yet, as on a fresh machine.
		cmd = exec.Command("go", "mod", "download", "-json", module)
		cmd.Dir = repodir.Root()
	} else {
		tmp, err := os.MkdirTemp("", "moduledir-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		cmd = exec.Command("go", "mod", "download", "-json", module+"@"+version)
		cmd.Dir = tmp
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", cmd, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("%s: no module directory: %s %v", cmd, info.Error, err)
	}
	return info.Dir, nil
}
