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
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
)

// TestClusterClassCluster: a cluster from a ClusterClass, the way
// quick-start users get one: a KubeadmControlPlane of three Ignition
// machines (the controlPlaneFormat variable) and one MachineDeployment per
// format (workerFormat, overridden per MachineDeployment), the class's
// patches setting each format's own fields. One topology change then makes
// the control plane raw (KCP replaces every machine, one by one, the cluster
// answering throughout) and moves a MachineDeployment to raw; at steady
// state nothing rolls out, before or after.
func TestClusterClassCluster(t *testing.T) {
	t.Parallel()
	w := newClassCluster(t, "clusterclass", 3, bootstrapv1.Ignition,
		stack.ClassWorkers{Name: "md-cloud-config", Format: bootstrapv1.CloudConfig, Replicas: 1},
		stack.ClassWorkers{Name: "md-ignition", Format: bootstrapv1.Ignition, Replicas: 1},
		stack.ClassWorkers{Name: "md-raw", Format: bootstrapv1.Raw, Replicas: 1},
		stack.ClassWorkers{Name: "mp-raw", Format: bootstrapv1.Raw, Replicas: 2, Pool: true},
	)
	machines := w.waitForMachines(6, 15*time.Minute)
	pool := w.classPool("mp-raw")
	w.waitForPools(map[string]bootstrapv1.Format{pool: bootstrapv1.Raw}, 2, 5*time.Minute)
	w.expectPoolConsumers(pool, bootstrapv1.Raw)
	w.expectNodes(machines)
	w.expectEtcdMembers()
	w.expectEachAPIServerWithItsEtcd(3)
	w.expectConsumers(consumers)
	want := map[string]bootstrapv1.Format{"": bootstrapv1.Ignition, "md-cloud-config": bootstrapv1.CloudConfig, "md-ignition": bootstrapv1.Ignition, "md-raw": bootstrapv1.Raw}
	w.expectClassFormats(want)
	w.expectNoKCPRollout(3, 2)

	// One topology change: the control plane becomes raw (the format
	// annotation in the topology's control-plane metadata; the variable
	// back to cloud-config, which changes KCP's spec: KCP replaces its
	// machines one by one), a MachineDeployment becomes raw (a new
	// bootstrap template: it rolls too) and the MachinePool Ignition
	// (Cluster API patches the pool's KubeadmConfig in place: its data is
	// rendered again for its next instances). The cluster answers
	// throughout.
	avail := w.watchAvailability()
	w.changeTopology(func(topology *clusterv1.Topology) {
		setVariable(&topology.Variables, stack.ControlPlaneFormatVariable, bootstrapv1.CloudConfig)
		topology.ControlPlane.Metadata.Annotations = map[string]string{bootstrapv1.FormatAnnotation: string(bootstrapv1.Raw)}
		for i := range topology.Workers.MachineDeployments {
			if md := &topology.Workers.MachineDeployments[i]; md.Name == "md-cloud-config" {
				setVariable(&md.Variables.Overrides, stack.WorkerFormatVariable, bootstrapv1.Raw)
			}
		}
		setVariable(&topology.Workers.MachinePools[0].Variables.Overrides, stack.WorkerFormatVariable, bootstrapv1.Ignition)
	})
	w.waitFor(time.Minute, "the MachinePool's data rendered again as Ignition", func() bool {
		return w.poolDataFormat(pool) == bootstrapv1.Ignition
	}, func() string { return string(w.poolDataFormat(pool)) })
	want[""], want["md-cloud-config"] = bootstrapv1.Raw, bootstrapv1.Raw
	rolledOut := func() bool {
		formats := w.classFormats()
		return slices.Equal(formats[""], []bootstrapv1.Format{bootstrapv1.Raw, bootstrapv1.Raw, bootstrapv1.Raw}) &&
			slices.Equal(formats["md-cloud-config"], []bootstrapv1.Format{bootstrapv1.Raw})
	}
	w.waitFor(20*time.Minute, "control plane and md-cloud-config rolled out to raw machines", rolledOut,
		func() string { return fmt.Sprint(w.classFormats()) })
	machines = w.waitForMachines(6, 5*time.Minute)
	avail.stop(t, 20*time.Second)
	w.expectNodes(machines)
	w.expectEtcdMembers()
	w.expectClassFormats(want)
	w.expectNoKCPRollout(3, 1)

	// The pool's instances kept the data they booted with (the simulated
	// cloud, like a scaling group without an instance refresh, replaces
	// none); one more instance, asked for through the topology, boots with
	// the rendered-again data: Ignition, with the class's Ignition patch.
	w.expectPoolConsumers(pool, bootstrapv1.Raw)
	w.changeTopology(func(topology *clusterv1.Topology) { topology.Workers.MachinePools[0].Replicas = ptr.To[int32](3) })
	w.waitForPools(map[string]bootstrapv1.Format{pool: bootstrapv1.Ignition}, 3, 5*time.Minute)
	w.expectPoolConsumers(pool, bootstrapv1.Raw, bootstrapv1.Raw, bootstrapv1.Ignition)
	instances := w.simulatedPool(pool).Status.Instances
	for i, in := range instances {
		wantWritten := "none"
		if i == len(instances)-1 {
			wantWritten = string(bootstrapv1.Ignition)
		}
		if got := strings.TrimSpace(w.onHost(in.Name, "sh", "-c", "cat "+stack.FormatPatchFile+" 2>/dev/null || echo none")); got != wantWritten {
			t.Errorf("pool instance %s: %s holds %q, want %q", in.Name, stack.FormatPatchFile, got, wantWritten)
		}
	}
}

// classPool returns the name of the MachinePool the topology made for a
// MachinePool topology.
func (w *workloadCluster) classPool(topologyName string) string {
	w.t.Helper()
	var pools clusterv1.MachinePoolList
	if err := w.c.List(context.Background(), &pools, client.InNamespace(w.Namespace),
		client.MatchingLabels{clusterv1.ClusterTopologyMachinePoolNameLabel: topologyName}); err != nil || len(pools.Items) != 1 {
		w.t.Fatalf("MachinePool of topology %s: %d found, %v", topologyName, len(pools.Items), err)
	}
	return pools.Items[0].Name
}

// poolDataFormat is the format the MachinePool's data secret was rendered in.
func (w *workloadCluster) poolDataFormat(pool string) bootstrapv1.Format {
	w.t.Helper()
	mp := &clusterv1.MachinePool{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, pool), mp); err != nil {
		w.t.Fatal(err)
	}
	if mp.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		return ""
	}
	s := &corev1.Secret{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, *mp.Spec.Template.Spec.Bootstrap.DataSecretName), s); err != nil {
		return ""
	}
	return bootstrapv1.Format(s.Data["format"])
}

// newClassCluster creates the ClusterClass (stack.ClusterClassObjects), waits
// until Cluster API reconciled it (its variables are known), then creates a
// Cluster of it.
func newClassCluster(t *testing.T, name string, controlPlaneReplicas int32, controlPlaneFormat bootstrapv1.Format, mds ...stack.ClassWorkers) *workloadCluster {
	t.Helper()
	w := newWorkloadClusterOf(t, name, func(w *workloadCluster) []client.Object {
		return append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.Namespace}}}, w.ClusterClassObjects()...)
	})
	if err := stack.WaitForClusterClass(context.Background(), w.c, w.Namespace, w.Name); err != nil {
		t.Fatalf("ClusterClass %s not reconciled: %v", w.Name, err)
	}
	w.create(w.ClassCluster(controlPlaneReplicas, controlPlaneFormat, mds...))
	return w
}

// renderedMachine is a Machine and the format its data secret says it was
// rendered in.
type renderedMachine struct {
	clusterv1.Machine
	format bootstrapv1.Format
}

// renderedMachines returns the namespace's Machines whose data secret exists,
// with its format, and how many Machines there are in all.
func (w *workloadCluster) renderedMachines() (rendered []renderedMachine, all int) {
	w.t.Helper()
	ctx := context.Background()
	var machines clusterv1.MachineList
	if err := w.c.List(ctx, &machines, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	for _, m := range machines.Items {
		if m.Spec.Bootstrap.DataSecretName == nil {
			continue
		}
		s := &corev1.Secret{}
		if err := w.c.Get(ctx, objectKey(w.Namespace, *m.Spec.Bootstrap.DataSecretName), s); err != nil {
			continue
		}
		rendered = append(rendered, renderedMachine{Machine: m, format: bootstrapv1.Format(s.Data["format"])})
	}
	return rendered, len(machines.Items)
}

// byMachineDeployment groups rendered machines' formats by the topology's
// MachineDeployment name ("" for the control plane).
func byMachineDeployment(rendered []renderedMachine) map[string][]bootstrapv1.Format {
	out := map[string][]bootstrapv1.Format{}
	for _, m := range rendered {
		md := m.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]
		out[md] = append(out[md], m.format)
	}
	return out
}

// classFormats returns the formats each machine's data secret says it
// rendered, by the topology's MachineDeployment name ("" for the control
// plane).
func (w *workloadCluster) classFormats() map[string][]bootstrapv1.Format {
	w.t.Helper()
	rendered, _ := w.renderedMachines()
	return byMachineDeployment(rendered)
}

// expectClassFormats checks, for each machine, the format its data was
// rendered in against want (by MachineDeployment, "" for the control plane)
// and what the class's format-specific patch left on its host: the
// FormatPatchFile its format's own means wrote, and no such file on raw
// machines (the raw format has no means, and the patch is not applied).
func (w *workloadCluster) expectClassFormats(want map[string]bootstrapv1.Format) {
	w.t.Helper()
	rendered, all := w.renderedMachines()
	if len(rendered) != all {
		w.t.Fatalf("%d of %d machines have their data secret", len(rendered), all)
	}
	for _, m := range rendered {
		md := m.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]
		if m.format != want[md] {
			w.t.Errorf("machine %s (%q): rendered %s, want %s", m.Name, md, m.format, want[md])
		}
		written := strings.TrimSpace(w.onHost(m.Name, "sh", "-c", "cat "+stack.FormatPatchFile+" 2>/dev/null || echo none"))
		wantWritten := "none"
		if m.format == bootstrapv1.Ignition || (m.format == bootstrapv1.CloudConfig && md != "") {
			wantWritten = string(m.format)
		}
		if written != wantWritten {
			w.t.Errorf("machine %s (%s): %s holds %q, want %q", m.Name, m.format, stack.FormatPatchFile, written, wantWritten)
		}
	}
	w.t.Logf("formats by MachineDeployment (\"\": control plane): %v", byMachineDeployment(rendered))
}

// changeTopology updates the Cluster's topology.
func (w *workloadCluster) changeTopology(change func(*clusterv1.Topology)) {
	w.t.Helper()
	cluster := &clusterv1.Cluster{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, w.Name), cluster); err != nil {
		w.t.Fatal(err)
	}
	patch := client.MergeFrom(cluster.DeepCopy())
	change(&cluster.Spec.Topology)
	if err := w.c.Patch(context.Background(), cluster, patch); err != nil {
		w.t.Fatal(err)
	}
}

// setVariable sets a variable of a topology's list to a format.
func setVariable(variables *[]clusterv1.ClusterVariable, name string, format bootstrapv1.Format) {
	for i := range *variables {
		if (*variables)[i].Name == name {
			(*variables)[i].Value = *stack.JSONValue(format)
			return
		}
	}
	*variables = append(*variables, clusterv1.ClusterVariable{Name: name, Value: *stack.JSONValue(format)})
}

// availability polls the workload cluster through its control-plane
// endpoint (a read that reaches etcd) every second, recording failures.
type availability struct {
	done     chan struct{}
	finished chan struct{}
	requests int
	failures []time.Time
	lastErr  error
}

func (w *workloadCluster) watchAvailability() *availability {
	w.t.Helper()
	cfg := rest.CopyConfig(w.restConfig())
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	a := &availability{done: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(a.finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-a.done:
				return
			case <-tick.C:
			}
			a.requests++
			// An empty resourceVersion asks for a quorum read: etcd answers.
			if _, err := cs.CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
				a.failures = append(a.failures, time.Now())
				a.lastErr = err
			}
		}
	}()
	return a
}

// stop ends the polling and fails the test if the cluster did not answer for
// longer than maxOutage at a stretch (failed requests less than 2s apart
// count as one outage).
func (a *availability) stop(t *testing.T, maxOutage time.Duration) {
	t.Helper()
	close(a.done)
	<-a.finished
	var longest time.Duration
	for i := 0; i < len(a.failures); {
		j := i
		for j+1 < len(a.failures) && a.failures[j+1].Sub(a.failures[j]) < 2*time.Second {
			j++
		}
		// A failure stands for the second before it too.
		longest = max(longest, a.failures[j].Sub(a.failures[i])+time.Second)
		i = j + 1
	}
	t.Logf("availability: %d of %d requests through the control-plane endpoint failed; longest outage %s (last error: %v)",
		len(a.failures), a.requests, longest, a.lastErr)
	if longest > maxOutage {
		t.Errorf("the workload cluster did not answer for %s at a stretch (allowed %s)", longest, maxOutage)
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
	class := stack.Cluster{Namespace: "class-refusals", Name: "class-refusals"}
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
	if err := stack.WaitForClusterClass(ctx, st.Client, class.Namespace, class.Name); err != nil {
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
