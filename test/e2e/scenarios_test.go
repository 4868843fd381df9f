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
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/workload"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
)

// TestCloudConfigCluster: one cloud-config control plane, two cloud-config
// workers; cloud-init runs each machine's data, kubeadm inits and joins.
func TestCloudConfigCluster(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Name: "cloud-config"})
	w.AddControlPlaneMachine("cloud-config-cp-0", bootstrapv1.CloudConfig, func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Users = []upstreambootstrapv1.User{{Name: "retired", Inactive: ptr.To(true)}, {Name: "ops", Passwd: "$6$rounds=4096$salt$hash"}}
		s.GzipUserData = ptr.To(true) // cloud-init decompresses it itself
		withRootProbe(s)
	})
	w.AddMachineDeployment("cloud-config-md", bootstrapv1.CloudConfig, 2, 0)
	machines := w.WaitForMachines(3, 5*time.Minute)
	w.ExpectNodes(machines)
	worker := w.WorkerMachine("cloud-config-md")
	// A pod on the control plane serves, a pod on a worker looks a Service
	// up through CoreDNS and fetches from it across the lab network.
	w.ExpectPodNetwork("cloud-config-cp-0", worker.Status.NodeRef.Name)
	w.ExpectServicesRestarted(worker)
	w.ExpectConsumers(bootstrapv1.CloudConfig)
	w.ExpectGzipped("cloud-config-cp-0", func(v []byte) bool { return bytes.HasPrefix(v, []byte{0x1f, 0x8b}) })
	// What cloud-init made of the users (shadow(5): field 2 the password,
	// "!" first when locked; field 8 the account's expiry in days).
	for _, tc := range []struct{ user, field, want string }{
		{"retired", "8", "1"}, // inactive: expired, no login at all
		{"ops", "2", "!"},     // lockPassword unset: cloud-init locks the password
	} {
		entry := strings.TrimSpace(w.OnHost("cloud-config-cp-0", "getent", "shadow", tc.user))
		fields := strings.Split(entry, ":")
		i := map[string]int{"2": 1, "8": 7}[tc.field]
		if len(fields) < 8 || !strings.HasPrefix(fields[i], tc.want) {
			t.Errorf("user %s: shadow field %s is %q, want %q...", tc.user, tc.field, fields[min(i, len(fields)-1)], tc.want)
		}
	}
	expectRootProbe(t, w, "cloud-config-cp-0")
	expectManagementReachable(t, w, "cloud-config-cp-0")
	w.ExpectNothingLeftBehind(3)
	// Last: the token of a machine deleted before it joined outlives it
	// until its TTL (the swap/hardening issue's territory).
	w.ExpectKubeletFailureVisible(bootstrapv1.CloudConfig)
}

// TestIgnitionCluster: with its gate off, the manager's webhook denies an
// Ignition template naming the gate; with it on, Ignition's own binary runs
// every machine's data.
func TestIgnitionCluster(t *testing.T) {
	t.Run("gate off: denied", func(t *testing.T) {
		withManagerArgs(t, "--feature-gates=KubeadmBootstrapFormatRaw=true")
		c := objects.Cluster{Namespace: "default", Name: "gate-off"}
		err := st.Client.Create(context.Background(), c.KubeadmConfigTemplate("ignition-gate-off", bootstrapv1.Ignition))
		if err == nil || !strings.Contains(err.Error(), "KubeadmBootstrapFormatIgnition") {
			t.Fatalf("creating an ignition template with the gate off: %v, want a denial naming the gate", err)
		}
		t.Logf("denied: %v", err)
		expectClassRefusals(t)
	})
	w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Name: "ignition"})
	w.AddControlPlaneMachine("ignition-cp-0", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Users = []upstreambootstrapv1.User{{Name: "jane.doe", Sudo: "ALL=(ALL) NOPASSWD:ALL"}}
		s.GzipUserData = ptr.To(true) // Ignition replaces the config with the gzip-compressed one
		withRootProbe(s)
	})
	w.AddMachineDeployment("ignition-md", bootstrapv1.Ignition, 2, 0)
	machines := w.WaitForMachines(3, 5*time.Minute)
	w.ExpectNodes(machines)
	w.ExpectConsumers(bootstrapv1.Ignition)
	w.ExpectGzipped("ignition-cp-0", func(v []byte) bool { return bytes.Contains(v, []byte(`"compression":"gzip"`)) })
	// Ignition created the user and a sudoers drop-in sudo reads (no "." in
	// its name); kubeadm's configuration, which holds the token, is gone.
	if out := w.OnHost("ignition-cp-0", "id", "jane.doe"); !strings.Contains(out, "jane.doe") {
		t.Errorf("user jane.doe: %s", out)
	}
	for _, f := range strings.Fields(w.OnHost("ignition-cp-0", "ls", "/etc/sudoers.d")) {
		if strings.Contains(f, ".") || strings.HasSuffix(f, "~") {
			t.Errorf("sudo skips /etc/sudoers.d/%s", f)
		}
	}
	if out := w.OnHost("ignition-cp-0", "cat", "/etc/sudoers.d/jane_doe"); !strings.HasPrefix(out, "jane.doe ALL=") {
		t.Errorf("sudoers drop-in: %q", out)
	}
	expectRootProbe(t, w, "ignition-cp-0")
	if out := w.OnHost("ignition-cp-0", "sh", "-c", "test -e "+bootstrapv1.IgnitionKubeadmConfigPath+" && echo present || echo absent"); strings.TrimSpace(out) != "absent" {
		t.Errorf("%s (the bootstrap token) is %s after kubeadm succeeded", bootstrapv1.IgnitionKubeadmConfigPath, out)
	}
}

// TestRawClusterScales: the raw agent runs every machine's data; the
// MachineDeployment scales 2 → 5 → 1 and nothing is left behind: no data
// secret without its config, no bootstrap token of this provider in the
// workload cluster once every machine joined.
func TestRawClusterScales(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Name: "raw"})
	w.AddControlPlaneMachine("raw-cp-0", bootstrapv1.Raw)
	w.AddMachineDeployment("raw-md", bootstrapv1.Raw, 2, 0)
	w.ExpectNodes(w.WaitForMachines(3, 5*time.Minute))
	w.ExpectConsumers(bootstrapv1.Raw)
	w.Scale("raw-md", 5)
	w.ExpectNodes(w.WaitForMachines(6, 5*time.Minute))
	w.Scale("raw-md", 1)
	w.ExpectNodes(w.WaitForMachines(2, 5*time.Minute))
	w.ExpectNothingLeftBehind(2)
}

// TestMixedFormats: a cloud-config control plane with one raw and one
// Ignition MachineDeployment in the same cluster.
func TestMixedFormats(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Name: "mixed"})
	w.AddControlPlaneMachine("mixed-cp-0", bootstrapv1.CloudConfig)
	w.AddMachineDeployment("mixed-raw", bootstrapv1.Raw, 1, 0)
	w.AddMachineDeployment("mixed-ignition", bootstrapv1.Ignition, 1, 0)
	w.ExpectNodes(w.WaitForMachines(3, 5*time.Minute))
	// Between the nodes of the other two formats.
	w.ExpectPodNetwork(w.WorkerMachine("mixed-raw").Status.NodeRef.Name, w.WorkerMachine("mixed-ignition").Status.NodeRef.Name)
	w.ExpectConsumers(bootstrapv1.CloudConfig, bootstrapv1.Raw, bootstrapv1.Ignition)
	w.ExpectNothingLeftBehind(3)
}

// TestRolloutToAnotherFormat: a MachineDeployment's KubeadmConfigTemplate is
// replaced by one of another format; Cluster API rolls the machines; the old
// machines keep their data until they go, the new ones join with theirs.
func TestRolloutToAnotherFormat(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	ctx := context.Background()
	w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Name: "rollout"})
	w.AddControlPlaneMachine("rollout-cp-0", bootstrapv1.CloudConfig)
	w.AddMachineDeployment("rollout-md", bootstrapv1.CloudConfig, 2, 0)
	w.ExpectNodes(w.WaitForMachines(3, 5*time.Minute))
	old := w.WorkerData()

	w.Create(w.Objects.KubeadmConfigTemplate("rollout-raw", bootstrapv1.Raw))
	md := &clusterv1.MachineDeployment{}
	if err := w.Client().Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: "rollout-md"}, md); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Template.Spec.Bootstrap.ConfigRef.Name = "rollout-raw"
	if err := w.Client().Patch(ctx, md, patch); err != nil {
		t.Fatal(err)
	}
	last := ""
	w.WaitFor(5*time.Minute, "the rollout to raw", func() bool {
		// While they exist, the old machines' data must not change.
		for name, data := range w.WorkerData() {
			if before, ok := old[name]; ok && before != data {
				t.Fatalf("machine %s's data changed during the rollout", name)
			}
		}
		rows := w.LogTable(&last)
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
	machines := w.WaitForMachines(3, time.Minute)
	w.ExpectNodes(machines)
	for name := range old {
		if _, ok := w.WorkerData()[name]; ok {
			t.Errorf("old machine %s is still there", name)
		}
	}
	w.ExpectConsumers(bootstrapv1.CloudConfig, bootstrapv1.Raw)
	w.ExpectNothingLeftBehind(3)
}

// TestSecondControlPlane: a second control-plane Machine runs kubeadm join
// --control-plane with the certificates its data carries: its own etcd
// member, API server, controller manager and scheduler.
func TestSecondControlPlane(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Name: "ha"})
	w.AddControlPlaneMachine("ha-cp-0", bootstrapv1.CloudConfig)
	w.ExpectNodes(w.WaitForMachines(1, 5*time.Minute))
	w.AddControlPlaneMachine("ha-cp-1", bootstrapv1.Raw)
	nodes := w.ExpectNodes(w.WaitForMachines(2, 6*time.Minute))
	for _, n := range nodes {
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; !ok {
			t.Errorf("node %s is not marked as a control plane", n.Name)
		}
	}
	w.ExpectEachAPIServerWithItsEtcd(2)
	w.ExpectNothingLeftBehind(2)
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

// rootProbe is a script at the root of a machine that a pre-kubeadm command
// runs by a relative path, as Cluster API's KCP remediation template runs its
// own: it records where it ran in rootProbeOut.
const (
	rootProbe    = "/root-probe.sh"
	rootProbeOut = "/root-probe.out"
)

func withRootProbe(s *bootstrapv1.KubeadmConfigSpec) {
	s.Files = append(s.Files, upstreambootstrapv1.File{Path: rootProbe, Permissions: "0755", Content: "#!/bin/sh\npwd > " + rootProbeOut + "\n"})
	s.PreKubeadmCommands = append(s.PreKubeadmCommands, "."+rootProbe)
}

// expectRootProbe checks that the machine's consumer ran the probe from "/"
// and that the host's "/" is its own: nothing the probe wrote is on this
// machine's root.
func expectRootProbe(t *testing.T, w *workload.Cluster, machine string) {
	t.Helper()
	if out := strings.TrimSpace(w.OnHost(machine, "cat", rootProbeOut)); out != "/" {
		t.Errorf("%s ran in %q, want /", rootProbe, out)
	}
	for _, p := range []string{rootProbe, rootProbeOut} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s, written on host %s, is on this machine's root", p, machine)
		}
	}
}

// expectManagementReachable checks that a host reaches the management API
// server at the address kube-public/cluster-info publishes, as machines of a
// real management cluster's workload clusters can.
func expectManagementReachable(t *testing.T, w *workload.Cluster, machine string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := st.Client.Get(context.Background(), client.ObjectKey{Namespace: metav1.NamespacePublic, Name: "cluster-info"}, cm); err != nil {
		t.Fatalf("the management cluster's cluster-info: %v", err)
	}
	kubeconfig, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
	if err != nil || kubeconfig.Clusters[""] == nil {
		t.Fatalf("cluster-info's kubeconfig has no cluster \"\": %v", err)
	}
	server := kubeconfig.Clusters[""].Server
	code := w.OnHost(machine, "curl", "-k", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", server+"/version")
	if code != "200" {
		t.Errorf("GET %s/version from host %s: HTTP %q, want 200", server, machine, code)
	}
}
