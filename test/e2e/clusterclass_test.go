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
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/workload"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
)

// TestClusterClassCluster: a cluster from a ClusterClass, the way
// quick-start users get one: a KubeadmControlPlane of three Ignition
// machines (the controlPlaneFormat variable) and one MachineDeployment per
// format (workerFormat, overridden per MachineDeployment), the class's
// patches setting each format's own fields. One topology change then makes
// the control plane raw (KCP replaces every machine, one by one, the cluster
// answering throughout), moves a MachineDeployment to raw and the
// MachinePool to Ignition (the pool rolls, every instance then running the
// class's Ignition patch); at steady state nothing rolls out, before or
// after.
func TestClusterClassCluster(t *testing.T) {
	t.Parallel()
	w := workload.NewClassCluster(t, workload.ClassClusterInput{
		Stack: st, Name: "clusterclass", ControlPlaneReplicas: 3, ControlPlaneFormat: bootstrapv1.Ignition,
		Workers: []objects.ClassWorkers{
			{Name: "md-cloud-config", Format: bootstrapv1.CloudConfig, Replicas: 1},
			{Name: "md-ignition", Format: bootstrapv1.Ignition, Replicas: 1},
			{Name: "md-raw", Format: bootstrapv1.Raw, Replicas: 1},
			{Name: "mp-raw", Format: bootstrapv1.Raw, Replicas: 2, Pool: true},
		},
	})
	machines := w.WaitForMachines(6, 15*time.Minute)
	pool := w.ClassPool("mp-raw")
	w.WaitForPools(map[string]bootstrapv1.Format{pool: bootstrapv1.Raw}, 2, 5*time.Minute)
	w.ExpectPoolConsumers(pool, bootstrapv1.Raw)
	w.ExpectNodes(machines)
	w.ExpectEtcdMembers()
	w.ExpectEachAPIServerWithItsEtcd(3)
	w.ExpectConsumers(bootstrapv1.CloudConfig, bootstrapv1.Ignition, bootstrapv1.Raw)
	want := map[string]bootstrapv1.Format{"": bootstrapv1.Ignition, "md-cloud-config": bootstrapv1.CloudConfig, "md-ignition": bootstrapv1.Ignition, "md-raw": bootstrapv1.Raw}
	w.ExpectClassFormats(want)
	w.ExpectNoKCPRollout(3, 2)

	// One topology change: the control plane becomes raw (the format
	// annotation in the topology's control-plane metadata; the variable
	// back to cloud-config, which changes KCP's spec: KCP replaces its
	// machines one by one), a MachineDeployment becomes raw (a new
	// bootstrap template: it rolls too) and the MachinePool Ignition
	// (Cluster API patches the pool's KubeadmConfig in place: its data is
	// rendered again under a new name, and the pool rolls). The cluster
	// answers throughout.
	avail := w.WatchAvailability()
	w.ChangeTopology(func(topology *clusterv1.Topology) {
		workload.SetVariable(&topology.Variables, objects.ControlPlaneFormatVariable, bootstrapv1.CloudConfig)
		topology.ControlPlane.Metadata.Annotations = map[string]string{bootstrapv1.FormatAnnotation: string(bootstrapv1.Raw)}
		for i := range topology.Workers.MachineDeployments {
			if md := &topology.Workers.MachineDeployments[i]; md.Name == "md-cloud-config" {
				workload.SetVariable(&md.Variables.Overrides, objects.WorkerFormatVariable, bootstrapv1.Raw)
			}
		}
		workload.SetVariable(&topology.Workers.MachinePools[0].Variables.Overrides, objects.WorkerFormatVariable, bootstrapv1.Ignition)
	})
	w.WaitFor(time.Minute, "the MachinePool's data rendered again as Ignition", func() bool {
		return w.PoolDataFormat(pool) == bootstrapv1.Ignition
	}, func() string { return string(w.PoolDataFormat(pool)) })
	want[""], want["md-cloud-config"] = bootstrapv1.Raw, bootstrapv1.Raw
	rolledOut := func() bool {
		formats := w.ClassFormats()
		return slices.Equal(formats[""], []bootstrapv1.Format{bootstrapv1.Raw, bootstrapv1.Raw, bootstrapv1.Raw}) &&
			slices.Equal(formats["md-cloud-config"], []bootstrapv1.Format{bootstrapv1.Raw})
	}
	w.WaitFor(20*time.Minute, "control plane and md-cloud-config rolled out to raw machines", rolledOut,
		func() string { return fmt.Sprint(w.ClassFormats()) })
	machines = w.WaitForMachines(6, 5*time.Minute)
	avail.Stop(t, 20*time.Second)
	w.ExpectNodes(machines)
	w.ExpectEtcdMembers()
	w.ExpectClassFormats(want)
	w.ExpectNoKCPRollout(3, 1)

	// The pool rolled: its config's data went into a data secret of a new
	// name, and the simulated cloud, as cluster-api-provider-aws does,
	// replaced the instances launched from another name, one at a time.
	// Every instance runs Ignition with the class's Ignition patch; so does
	// one more, asked for through the topology.
	w.WaitForPoolRollout(pool, bootstrapv1.Ignition, 2, 10*time.Minute)
	w.ExpectPoolConsumers(pool, bootstrapv1.Ignition)
	w.ChangeTopology(func(topology *clusterv1.Topology) { topology.Workers.MachinePools[0].Replicas = ptr.To[int32](3) })
	w.WaitForPools(map[string]bootstrapv1.Format{pool: bootstrapv1.Ignition}, 3, 5*time.Minute)
	w.ExpectPoolConsumers(pool, bootstrapv1.Ignition)
	for _, in := range w.SimulatedPool(pool).Status.Instances {
		if got := strings.TrimSpace(w.OnHost(in.Name, "sh", "-c", "cat "+objects.FormatPatchFile+" 2>/dev/null || echo none")); got != string(bootstrapv1.Ignition) {
			t.Errorf("pool instance %s: %s holds %q, want %q", in.Name, objects.FormatPatchFile, got, bootstrapv1.Ignition)
		}
	}
}

// TestClusterClassPoolsRoll: a ClusterClass Cluster with a MachinePool per
// format, on a management cluster of its own whose tokens live 30 s.
// Several token rotations roll no pool: each keeps its data secret's name.
// A topology variable that gives workers a kubeadm patch file and a kubelet
// flag then rolls every pool (a new data secret name, which the simulated
// cloud keys on, as cluster-api-provider-aws does), and every instance runs
// them, checked on its host and its Node.
func TestClusterClassPoolsRoll(t *testing.T) {
	t.Parallel() // on a management cluster of its own
	const ttl = 30 * time.Second
	m := workload.StartManagement(t, workload.ManagementInput{Stack: st, Name: "pools-home",
		ManagerArgs: append([]string{"--bootstrap-token-ttl=" + ttl.String()}, managerArgs...)})
	formats := map[string]bootstrapv1.Format{"mp-cloud-config": bootstrapv1.CloudConfig, "mp-ignition": bootstrapv1.Ignition, "mp-raw": bootstrapv1.Raw}
	var workers []objects.ClassWorkers
	for _, name := range slices.Sorted(maps.Keys(formats)) {
		workers = append(workers, objects.ClassWorkers{Name: name, Format: formats[name], Replicas: 1, Pool: true})
	}
	w := workload.NewClassCluster(t, workload.ClassClusterInput{
		Stack: st, Management: m, Name: "pools", ControlPlaneReplicas: 1, ControlPlaneFormat: bootstrapv1.CloudConfig, Workers: workers,
	})
	w.WaitForMachines(1, 10*time.Minute)
	pools := map[string]bootstrapv1.Format{}
	for name, format := range formats {
		pools[w.ClassPool(name)] = format
	}
	w.WaitForPools(pools, 1, 5*time.Minute)
	names := slices.Sorted(maps.Keys(pools))
	w.ExpectRotationsRollNothing(names, 2, 3*ttl)

	named := map[string]string{}
	for _, pool := range names {
		named[pool] = w.PoolDataSecretName(pool)
	}
	w.ChangeTopology(func(topology *clusterv1.Topology) {
		workload.SetVariable(&topology.Variables, objects.WorkerRevisionVariable, "7")
	})
	for _, pool := range names {
		w.WaitFor(time.Minute, "pool "+pool+" to name a new data secret", func() bool { return w.PoolDataSecretName(pool) != named[pool] })
	}
	for _, pool := range names {
		w.WaitForPoolRollout(pool, pools[pool], 1, 10*time.Minute)
		w.ExpectPoolConsumers(pool, pools[pool])
		w.ExpectPoolRevision(pool, "7")
	}
}

// expectClassRefusals: with the Ignition gate off, two Clusters of a
// ClusterClass get no KubeadmControlPlane, this provider's admission refusing
// the one their topology computes, naming the field: one whose
// controlPlaneFormat variable is Ignition (and the gate), one whose topology
// annotation asks for raw while the variable sets Ignition (a
// contradiction). Their TopologyReconciled condition says that creating the
// KubeadmControlPlane failed; Cluster API leaves the admission's message out
// of conditions and logs it, so that is where it is read here, as an
// operator would.
func expectClassRefusals(t *testing.T) {
	ctx := context.Background()
	class := objects.Cluster{Namespace: "class-refusals", Name: "class-refusals"}
	objects := append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: class.Namespace}}}, class.ClusterClassObjects()...)
	for _, o := range objects {
		if err := st.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		_ = st.Client.DeleteAllOf(ctx, &clusterv1.Cluster{}, client.InNamespace(class.Namespace))
		_ = st.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: class.Namespace}})
	})
	if err := workload.WaitForClusterClass(ctx, st.Client, class.Namespace, class.Name); err != nil {
		t.Fatal(err)
	}
	gated := class.ClassCluster(1, bootstrapv1.Ignition)
	gated.Name = "gated"
	contradicting := class.ClassCluster(1, bootstrapv1.Ignition)
	contradicting.Name = "contradicting"
	contradicting.Spec.Topology.ControlPlane.Metadata.Annotations = map[string]string{bootstrapv1.FormatAnnotation: string(bootstrapv1.Raw)}
	for _, tc := range []struct {
		cluster *clusterv1.Cluster
		want    []string
	}{
		{gated, []string{"spec.kubeadmConfigSpec.format", "KubeadmBootstrapFormatIgnition"}},
		{contradicting, []string{bootstrapv1.FormatAnnotation, "contradicts"}},
	} {
		tc.cluster.Labels = map[string]string{clusterv1.ClusterNameLabel: tc.cluster.Name}
		if err := st.Client.Create(ctx, tc.cluster); err != nil {
			t.Fatal(err)
		}
		var message, refusal string
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(message, "failed to create KubeadmControlPlane") || refusal == "" {
			if time.Now().After(deadline) {
				t.Fatalf("Cluster %s after 1m: TopologyReconciled %q; Cluster API's log has no refusal saying %q", tc.cluster.Name, message, tc.want)
			}
			time.Sleep(2 * time.Second)
			cluster := &clusterv1.Cluster{}
			if err := st.Client.Get(ctx, client.ObjectKeyFromObject(tc.cluster), cluster); err != nil {
				t.Fatal(err)
			}
			if cond := conditions.Get(cluster, clusterv1.ClusterTopologyReconciledCondition); cond != nil && cond.Status == metav1.ConditionFalse {
				message = cond.Message
			}
			refusal = topologyRefusal(t, tc.cluster.Name, tc.want)
		}
		t.Logf("Cluster %s: TopologyReconciled %q; the KubeadmControlPlane refused: %s", tc.cluster.Name, message, refusal)
	}
	var kcps controlplanev1.KubeadmControlPlaneList
	if err := st.Client.List(ctx, &kcps, client.InNamespace(class.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(kcps.Items) > 0 {
		t.Errorf("a KubeadmControlPlane was created: %s", kcps.Items[0].Name)
	}
}

// topologyRefusal returns the admission refusal Cluster API's topology
// controller logged for a Cluster's object, if it says every one of want.
func topologyRefusal(t *testing.T, cluster string, want []string) string {
	t.Helper()
	b, err := os.ReadFile(st.ClusterAPILog())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var entry struct {
			Msg     string `json:"msg"`
			Error   string `json:"error"`
			Cluster struct {
				Name string `json:"name"`
			} `json:"Cluster"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil || entry.Cluster.Name != cluster || !strings.Contains(entry.Error, "denied the request") {
			continue
		}
		found := true
		for _, w := range want {
			found = found && strings.Contains(entry.Error, w)
		}
		if found {
			return entry.Error
		}
	}
	return ""
}
