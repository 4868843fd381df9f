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
	"errors"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"testing"
)

// GoBuild builds a package of this module (or one it requires) into out, from
// the repository root, as `go build -o out pkg`.
func GoBuild(out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// InParallel runs do(i) for every i in [0, n), eight at a time (as Cluster
// API's controllers create many objects at once), and returns the errors.
func InParallel(n int, do func(int) error) error { return InParallelN(n, 8, do) }

// InParallelN is InParallel, width at a time.
func InParallelN(n, width int, do func(int) error) error {
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range max(width, 1) {
		wg.Go(func() {
			for i := range work {
				if err := do(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}
