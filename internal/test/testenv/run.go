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

package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"
)

// RunInput says what the tests of a package share.
type RunInput struct {
	M *testing.M
	// Management is the management API server's options.
	Management Options
	// RestartableManagement keeps the management API server's certificates
	// and port across RestartAPIServer.
	RestartableManagement bool
	// Workload also starts a plain API server that plays a workload cluster.
	Workload bool
	// Binaries are built before the servers start: a name for each package
	// to build. Shared.Binaries has their paths.
	Binaries map[string]string
	// Setup runs once everything is up, before the tests; the teardown it
	// returns (if any) runs after them.
	Setup func(*Shared) (teardown func(), err error)
}

// Shared is what Run started for a package's tests.
type Shared struct {
	Management, Workload *Environment
	// Binaries maps each RunInput.Binaries name to its executable.
	Binaries map[string]string
}

// Run is a test package's TestMain: it starts what the package's tests
// share, runs them and stops everything, returning the exit code
// (os.Exit(testenv.Run(...))).
func Run(in RunInput) int {
	code, err := run(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func run(in RunInput) (int, error) {
	dir, err := os.MkdirTemp("", "testenv-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	shared := &Shared{Binaries: map[string]string{}}
	for name, pkg := range in.Binaries {
		bin := filepath.Join(dir, name)
		if err := process.Build(bin, pkg); err != nil {
			return 0, err
		}
		shared.Binaries[name] = bin
	}
	if in.RestartableManagement {
		in.Management.APIServerDir = filepath.Join(dir, "apiserver")
	}
	if shared.Management, err = New(in.Management); err != nil {
		return 0, fmt.Errorf("management API server: %w", err)
	}
	defer func() { _ = shared.Management.Stop() }()
	if in.Workload {
		if shared.Workload, err = New(Options{}); err != nil {
			return 0, fmt.Errorf("workload API server: %w", err)
		}
		defer func() { _ = shared.Workload.Stop() }()
	}
	if in.Setup != nil {
		teardown, err := in.Setup(shared)
		if err != nil {
			return 0, err
		}
		if teardown != nil {
			defer teardown()
		}
	}
	return in.M.Run(), nil
}
