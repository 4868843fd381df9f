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

package stack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// RunInput says how Run starts the stack a test package shares.
type RunInput struct {
	M *testing.M
	// ManagerArgs are this provider's manager's flags.
	ManagerArgs []string
	// MachineImages, when set, gives the Lab's machine images besides the
	// node image (Options); it runs after Enter, in the test process
	// only.
	MachineImages func() (map[string][]host.ImageArchive, error)
	// OtherReleases are Kubernetes releases the Lab boots besides the
	// default one (Options).
	OtherReleases []testbin.Release
	// Setup receives the stack before the tests run.
	Setup func(*Stack)
}

// Run is an e2e package's TestMain: it starts the stack (a management
// cluster with Cluster API's controllers, this provider's manager and the
// simulated infrastructure), runs the tests, stops the stack and checks that
// it left nothing on this machine. It returns the exit code
// (os.Exit(stack.Run(...))).
func Run(in RunInput) int {
	if !Enter() {
		return 0
	}
	opts := Options{ManagerArgs: in.ManagerArgs, OtherReleases: in.OtherReleases}
	if in.MachineImages != nil {
		images, err := in.MachineImages()
		if err != nil {
			fmt.Printf("e2e: %v\n", err)
			return 1
		}
		opts.MachineImages = images
	}
	shared, err := StartShared(opts)
	if err != nil {
		fmt.Printf("e2e: %v\n", err)
		return 1
	}
	if in.Setup != nil {
		in.Setup(shared.Stack)
	}
	code := in.M.Run()
	if err := shared.Stop(); err != nil {
		fmt.Printf("e2e: %v\n", err)
		code = 1
	}
	if code == 0 {
		shared.RemoveState()
	}
	return code
}

// Enter is where an e2e package's TestMain begins. Hosts re-execute the
// test binary, so a host never returns from it; otherwise it says whether
// this process can run the e2e (namespaces, overlays and veth pairs need
// root).
func Enter() bool {
	host.RunIfHost()
	if os.Geteuid() != 0 {
		fmt.Println("e2e: needs root (namespaces, overlays, veth pairs); skipped")
		return false
	}
	return true
}

// Shared is a stack that one process starts for all the tests of a package,
// in a state directory of its own.
type Shared struct {
	*Stack
}

// StartShared starts a stack with opts in a new state directory, printing
// its progress.
func StartShared(opts Options) (*Shared, error) {
	stateDir, err := os.MkdirTemp("", "cabpk-e2e-")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	opts.StateDir, opts.Progress = stateDir, os.Stdout
	st, err := Start(context.Background(), opts)
	if err != nil {
		return nil, fmt.Errorf("starting the stack: %w (logs in %s)", err, stateDir)
	}
	fmt.Printf("e2e: stack up in %s; logs in %s\n", time.Since(start).Round(time.Second), stateDir)
	return &Shared{Stack: st}, nil
}

// Stop stops the stack and checks that it left nothing on this machine.
// Stopped hosts leave nothing: no process (their PID namespaces died), no
// cgroup, mount, network interface or containerd root.
func (s *Shared) Stop() error {
	s.Stack.Stop()
	if left := s.Lab.Leftovers(); len(left) > 0 {
		return fmt.Errorf("the stopped stack left these behind on this machine:\n  %s", strings.Join(left, "\n  "))
	}
	fmt.Println("e2e: nothing left behind (cgroups, mounts, network interfaces, containerd roots)")
	return nil
}

// RemoveState removes the stack's logs; a failed run keeps them.
func (s *Shared) RemoveState() { _ = os.RemoveAll(s.StateDir()) }
