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

package management

import (
	"os"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

var (
	// st is the stack the package's host tests share.
	st *stack.Stack
	// rel is what the management clusters install, built for the run.
	rel *releases.Releases
)

// TestMain builds the releases only in the test process: every host
// re-executes this binary and never returns from stack.Run.
func TestMain(m *testing.M) {
	var dir string
	code := stack.Run(stack.RunInput{M: m, MachineImages: func() (map[string][]host.ImageArchive, error) {
		var err error
		if dir, err = os.MkdirTemp("", "releases-"); err != nil {
			return nil, err
		}
		if rel, err = releases.Build(dir); err != nil {
			return nil, err
		}
		return map[string][]host.ImageArchive{releases.MachineImage: rel.Images}, nil
	}, Setup: func(s *stack.Stack) { st = s }})
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}
