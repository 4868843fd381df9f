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

// Package e2e proves the provider with Cluster API's own controllers: every
// machine's bootstrap data is run by its format's real consumer on a
// simulated host, real kubeadm brings up a real workload control plane, and
// workers really join it (see test/e2e/stack and
// test/infrastructure/simulated).
package e2e

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

var (
	st       *stack.Stack
	stateDir string
)

// managerArgs turn on both gated formats and shorten the token TTL so that
// extensions happen within a test.
var managerArgs = []string{"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true"}

func TestMain(m *testing.M) {
	host.RunIfHost()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: needs root (namespaces, overlays, veth pairs); skipped")
		return 0
	}
	var err error
	if stateDir, err = os.MkdirTemp("", "cabpk-e2e-"); err != nil {
		fmt.Println(err)
		return 1
	}
	start := time.Now()
	st, err = stack.Start(context.Background(), stack.Options{StateDir: stateDir, ManagerArgs: managerArgs, Progress: os.Stdout})
	if err != nil {
		fmt.Printf("e2e: starting the stack: %v (logs in %s)\n", err, stateDir)
		return 1
	}
	fmt.Printf("e2e: stack up in %s; logs in %s\n", time.Since(start).Round(time.Second), stateDir)
	code := m.Run()
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
