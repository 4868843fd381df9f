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
// tests, the demo and the release tool that read its manifests and examples.
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
