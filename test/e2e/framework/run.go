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

// Package framework is what the e2e suites are written with: the stack a
// test package shares (Run), and workload clusters with the checks a test
// makes of them, grouped by subject: machines and clusters, nodes,
// KubeadmControlPlane, ClusterClass, MachinePools, tokens and data secrets,
// clusterctl move. Test files hold the scenarios.
package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// RunInput says how Run starts the stack a test package shares.
type RunInput struct {
	M *testing.M
	// ManagerArgs are this provider's manager's flags.
	ManagerArgs []string
	// Setup receives the stack before the tests run.
	Setup func(*stack.Stack)
}

// Run is an e2e package's TestMain: it starts the stack (a management
// cluster with Cluster API's controllers, this provider's manager and the
// simulated infrastructure), runs the tests, stops the stack and checks that
// it left nothing on this machine. It returns the exit code
// (os.Exit(framework.Run(...))). Hosts re-execute the test binary: Run
// serves them first.
func Run(in RunInput) int {
	host.RunIfHost()
	if os.Geteuid() != 0 {
		fmt.Println("e2e: needs root (namespaces, overlays, veth pairs); skipped")
		return 0
	}
	stateDir, err := os.MkdirTemp("", "cabpk-e2e-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	start := time.Now()
	st, err := stack.Start(context.Background(), stack.Options{StateDir: stateDir, ManagerArgs: in.ManagerArgs, Progress: os.Stdout})
	if err != nil {
		fmt.Printf("e2e: starting the stack: %v (logs in %s)\n", err, stateDir)
		return 1
	}
	fmt.Printf("e2e: stack up in %s; logs in %s\n", time.Since(start).Round(time.Second), stateDir)
	if in.Setup != nil {
		in.Setup(st)
	}
	code := in.M.Run()
	st.Stop()
	// Stopped hosts leave nothing on this machine: no process (their PID
	// namespaces died), no cgroup, mount, network interface or containerd
	// root.
	if left := st.Lab.Leftovers(); len(left) > 0 {
		fmt.Printf("e2e: the stopped stack left these behind on this machine:\n  %s\n", strings.Join(left, "\n  "))
		code = 1
	} else {
		fmt.Println("e2e: nothing left behind (cgroups, mounts, network interfaces, containerd roots)")
	}
	if code == 0 {
		_ = os.RemoveAll(stateDir)
	}
	return code
}
