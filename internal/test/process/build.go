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

// Package process builds binaries and runs them as the processes tests need:
// a manager binary (this provider's or upstream's) as its Deployment runs it,
// with its flags, a memory cgroup and a Pod's namespace file.
package process

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
)

// Build builds a package of the product module (or one it requires) into
// out, from the repository root, as `go build -o out pkg`.
func Build(out, pkg string) error {
	return BuildIn(repodir.Root(), out, pkg)
}

// BuildIn builds pkg in the Go module whose directory is moduleDir: a package
// of the test module builds only in its own (repodir.TestModule).
func BuildIn(moduleDir, out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// processes that must be told their port before they start.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := FreeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FreeTCPPort is FreePort outside a test.
func FreeTCPPort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}
