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

package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
)

// TestCloudConfigCluster: one cloud-config control plane, two cloud-config
// workers; cloud-init runs each machine's data, kubeadm inits and joins.
func TestCloudConfigCluster(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	w := newWorkloadCluster(t, "cloud-config")
	w.controlPlaneMachine("cloud-config-cp-0", bootstrapv1.CloudConfig, func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Users = []upstreambootstrapv1.User{{Name: "retired", Inactive: ptr.To(true)}, {Name: "ops", Passwd: "$6$rounds=4096$salt$hash"}}
		s.GzipUserData = ptr.To(true) // cloud-init decompresses it itself
	})
	w.machineDeployment("cloud-config-md", bootstrapv1.CloudConfig, 2, 0)
	machines := w.waitForMachines(3, 5*time.Minute)
	w.expectNodes(machines)
	worker := w.workerMachine("cloud-config-md")
	// A pod on the control plane serves, a pod on a worker looks a Service
	// up through CoreDNS and fetches from it across the lab network.
	w.expectPodNetwork("cloud-config-cp-0", worker.Status.NodeRef.Name)
	w.expectServicesRestarted(worker)
	w.expectConsumers(map[bootstrapv1.Format]string{bootstrapv1.CloudConfig: "cloud-init"})
	w.expectGzipped("cloud-config-cp-0", func(v []byte) bool { return bytes.HasPrefix(v, []byte{0x1f, 0x8b}) })
	// What cloud-init made of the users (shadow(5): field 2 the password,
	// "!" first when locked; field 8 the account's expiry in days).
	for _, tc := range []struct{ user, field, want string }{
		{"retired", "8", "1"}, // inactive: expired, no login at all
		{"ops", "2", "!"},     // lockPassword unset: cloud-init locks the password
	} {
		entry := strings.TrimSpace(w.onHost("cloud-config-cp-0", "getent", "shadow", tc.user))
		fields := strings.Split(entry, ":")
		i := map[string]int{"2": 1, "8": 7}[tc.field]
		if len(fields) < 8 || !strings.HasPrefix(fields[i], tc.want) {
			t.Errorf("user %s: shadow field %s is %q, want %q...", tc.user, tc.field, fields[min(i, len(fields)-1)], tc.want)
		}
	}
	w.expectNothingLeftBehind(3)
	// Last: the token of a machine deleted before it joined outlives it
	// until its TTL (the swap/hardening issue's territory).
	w.expectKubeletFailureVisible(bootstrapv1.CloudConfig)
}

// TestIgnitionCluster: with its gate off, the manager's webhook denies an
// Ignition template naming the gate; with it on, Ignition's own binary runs
// every machine's data.
func TestIgnitionCluster(t *testing.T) {
	t.Run("gate off: denied", func(t *testing.T) {
		withManagerArgs(t, "--feature-gates=KubeadmBootstrapFormatRaw=true")
		c := stack.Cluster{Namespace: "default", Name: "gate-off"}
		err := st.Client.Create(context.Background(), c.KubeadmConfigTemplate("ignition-gate-off", bootstrapv1.Ignition))
		if err == nil || !strings.Contains(err.Error(), "KubeadmBootstrapFormatIgnition") {
			t.Fatalf("creating an ignition template with the gate off: %v, want a denial naming the gate", err)
		}
		t.Logf("denied: %v", err)
		expectClassRefusals(t)
	})
	w := newWorkloadCluster(t, "ignition")
	w.controlPlaneMachine("ignition-cp-0", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Users = []upstreambootstrapv1.User{{Name: "jane.doe", Sudo: "ALL=(ALL) NOPASSWD:ALL"}}
		s.GzipUserData = ptr.To(true) // Ignition replaces the config with the gzip-compressed one
	})
	w.machineDeployment("ignition-md", bootstrapv1.Ignition, 2, 0)
	machines := w.waitForMachines(3, 5*time.Minute)
	w.expectNodes(machines)
	w.expectConsumers(map[bootstrapv1.Format]string{bootstrapv1.Ignition: "ignition"})
	w.expectGzipped("ignition-cp-0", func(v []byte) bool { return bytes.Contains(v, []byte(`"compression":"gzip"`)) })
	// Ignition created the user and a sudoers drop-in sudo reads (no "." in
	// its name); kubeadm's configuration, which holds the token, is gone.
	if out := w.onHost("ignition-cp-0", "id", "jane.doe"); !strings.Contains(out, "jane.doe") {
		t.Errorf("user jane.doe: %s", out)
	}
	for _, f := range strings.Fields(w.onHost("ignition-cp-0", "ls", "/etc/sudoers.d")) {
		if strings.Contains(f, ".") || strings.HasSuffix(f, "~") {
			t.Errorf("sudo skips /etc/sudoers.d/%s", f)
		}
	}
	if out := w.onHost("ignition-cp-0", "cat", "/etc/sudoers.d/jane_doe"); !strings.HasPrefix(out, "jane.doe ALL=") {
		t.Errorf("sudoers drop-in: %q", out)
	}
	if out := w.onHost("ignition-cp-0", "sh", "-c", "test -e "+bootstrapv1.IgnitionKubeadmConfigPath+" && echo present || echo absent"); strings.TrimSpace(out) != "absent" {
		t.Errorf("%s (the bootstrap token) is %s after kubeadm succeeded", bootstrapv1.IgnitionKubeadmConfigPath, out)
	}
}

// TestRawClusterScales: the raw agent runs every machine's data; the
// MachineDeployment scales 2 → 5 → 1 and nothing is left behind: no data
// secret without its config, no bootstrap token of this provider in the
// workload cluster once every machine joined.
func TestRawClusterScales(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	w := newWorkloadCluster(t, "raw")
	w.controlPlaneMachine("raw-cp-0", bootstrapv1.Raw)
	w.machineDeployment("raw-md", bootstrapv1.Raw, 2, 0)
	w.expectNodes(w.waitForMachines(3, 5*time.Minute))
	w.expectConsumers(map[bootstrapv1.Format]string{bootstrapv1.Raw: "raw agent (pkg/rawagent)"})
	w.scale("raw-md", 5)
	w.expectNodes(w.waitForMachines(6, 5*time.Minute))
	w.scale("raw-md", 1)
	w.expectNodes(w.waitForMachines(2, 5*time.Minute))
	w.expectNothingLeftBehind(2)
}

// TestMixedFormats: a cloud-config control plane with one raw and one
// Ignition MachineDeployment in the same cluster.
func TestMixedFormats(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	w := newWorkloadCluster(t, "mixed")
	w.controlPlaneMachine("mixed-cp-0", bootstrapv1.CloudConfig)
	w.machineDeployment("mixed-raw", bootstrapv1.Raw, 1, 0)
	w.machineDeployment("mixed-ignition", bootstrapv1.Ignition, 1, 0)
	w.expectNodes(w.waitForMachines(3, 5*time.Minute))
	// Between the nodes of the other two formats.
	w.expectPodNetwork(w.workerMachine("mixed-raw").Status.NodeRef.Name, w.workerMachine("mixed-ignition").Status.NodeRef.Name)
	w.expectConsumers(map[bootstrapv1.Format]string{
		bootstrapv1.CloudConfig: "cloud-init", bootstrapv1.Raw: "raw agent (pkg/rawagent)", bootstrapv1.Ignition: "ignition",
	})
	w.expectNothingLeftBehind(3)
}

// TestRolloutToAnotherFormat: a MachineDeployment's KubeadmConfigTemplate is
// replaced by one of another format; Cluster API rolls the machines; the old
// machines keep their data until they go, the new ones join with theirs.
func TestRolloutToAnotherFormat(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	ctx := context.Background()
	w := newWorkloadCluster(t, "rollout")
	w.controlPlaneMachine("rollout-cp-0", bootstrapv1.CloudConfig)
	w.machineDeployment("rollout-md", bootstrapv1.CloudConfig, 2, 0)
	w.expectNodes(w.waitForMachines(3, 5*time.Minute))
	old := w.workerData()

	w.create(w.KubeadmConfigTemplate("rollout-raw", bootstrapv1.Raw))
	md := &clusterv1.MachineDeployment{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: "rollout-md"}, md); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Template.Spec.Bootstrap.ConfigRef.Name = "rollout-raw"
	if err := w.c.Patch(ctx, md, patch); err != nil {
		t.Fatal(err)
	}
	last := ""
	w.waitFor(5*time.Minute, "the rollout to raw", func() bool {
		// While they exist, the old machines' data must not change.
		for name, data := range w.workerData() {
			if before, ok := old[name]; ok && before != data {
				t.Fatalf("machine %s's data changed during the rollout", name)
			}
		}
		rows := w.logTable(&last)
		if len(rows) != 3 {
			return false
		}
		for _, r := range rows {
			if !r.Done() || (r.Machine != "rollout-cp-0" && r.Format != bootstrapv1.Raw) {
				return false
			}
		}
		return true
	})
	machines := w.waitForMachines(3, time.Minute)
	w.expectNodes(machines)
	for name := range old {
		if _, ok := w.workerData()[name]; ok {
			t.Errorf("old machine %s is still there", name)
		}
	}
	w.expectConsumers(map[bootstrapv1.Format]string{bootstrapv1.CloudConfig: "cloud-init", bootstrapv1.Raw: "raw agent (pkg/rawagent)"})
	w.expectNothingLeftBehind(3)
}

// TestSecondControlPlane: a second control-plane Machine runs kubeadm join
// --control-plane with the certificates its data carries: its own etcd
// member, API server, controller manager and scheduler.
func TestSecondControlPlane(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	w := newWorkloadCluster(t, "ha")
	w.controlPlaneMachine("ha-cp-0", bootstrapv1.CloudConfig)
	w.expectNodes(w.waitForMachines(1, 5*time.Minute))
	w.controlPlaneMachine("ha-cp-1", bootstrapv1.Raw)
	nodes := w.expectNodes(w.waitForMachines(2, 6*time.Minute))
	for _, n := range nodes {
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; !ok {
			t.Errorf("node %s is not marked as a control plane", n.Name)
		}
	}
	w.expectEachAPIServerWithItsEtcd(2)
	w.expectNothingLeftBehind(2)
}

// withManagerArgs restarts the manager with other flags for the rest of the
// test, and with the suite's flags after it.
func withManagerArgs(t *testing.T, args ...string) {
	t.Helper()
	if err := st.RestartManager(args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.RestartManager(managerArgs...); err != nil {
			t.Error(err)
		}
	})
}
