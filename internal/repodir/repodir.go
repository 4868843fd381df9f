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

// Package repodir finds this repository's root directory at run time, for the
// tests, the demo and the release tool that read its manifests and examples,
// and the directories of its Go modules, for those that build binaries.
package repodir

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/modfile"
)

// ModulePath is this repository's Go module.
const ModulePath = "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm"

// Root is the nearest directory at or above the working directory whose go.mod
// declares this module: tests run in their package's directory, the demo and
// the tools in the root. It is not derived from a source file's path, which a
// -trimpath build (make test's) does not keep.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("repodir: %v", err))
	}
	for d := dir; ; {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modfile.ModulePath(b) == ModulePath {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			panic(fmt.Sprintf("repodir: %s is not inside a checkout of %s", dir, ModulePath))
		}
		d = parent
	}
}

// TestModule is the directory of the test module (test/go.mod): the e2e, the
// simulated provider and the tools that build their world. Its packages
// build only there; the product module does not require what they link.
func TestModule() string {
	return filepath.Join(Root(), "test")
}

// ToolsModule is the directory of the developer tools' module (hack/go.mod).
func ToolsModule() string {
	return filepath.Join(Root(), "hack")
}
