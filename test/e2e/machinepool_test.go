package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/controllers"
)

// consumers is the program that runs each format's data on a host.
var consumers = map[bootstrapv1.Format]string{
	bootstrapv1.CloudConfig: "cloud-init", bootstrapv1.Ignition: "ignition", bootstrapv1.Raw: "raw agent (pkg/rawagent)",
}

// testMachinePools runs a MachinePool of 3 in each format in w (whose
// manager has a short token TTL): every instance joins with its pool's one
// data secret; once a pool settles its token is rotated (the data secret
// gets a new token, the old one expires and the workload cluster's token
// cleaner removes it); scaled to 5, the new instances boot with the rotated
// data and join, which they could not with the first token; scaled to 2,
// the oldest instances and their Nodes go.
func testMachinePools(w *workloadCluster) {
	w.t.Helper()
	pools := map[string]bootstrapv1.Format{}
	for _, f := range bootstrapv1.Formats {
		name := w.Name + "-pool-" + string(f)
		pools[name] = f
		w.create(w.MachinePool(name, f, 3)...)
	}
	w.waitForPools(pools, 3, 8*time.Minute)
	for name, f := range pools {
		w.expectPoolConsumers(name, f)
	}

	first := map[string]string{}
	for name := range pools {
		first[name] = w.poolTokenID(name)
	}
	w.waitFor(3*time.Minute, "every pool's token rotated, the first one gone from the workload cluster", func() bool {
		for name := range pools {
			if w.poolTokenID(name) == first[name] || w.workloadTokenExists(first[name]) {
				return false
			}
		}
		return true
	})
	w.t.Logf("tokens rotated; the first ones expired and were cleaned up: %v", first)

	for name := range pools {
		w.scalePool(name, 5)
	}
	w.waitForPools(pools, 5, 6*time.Minute)
	for name, f := range pools {
		w.expectPoolConsumers(name, f)
	}
	kept := map[string][]string{}
	for name := range pools {
		instances := w.simulatedPool(name).Status.Instances
		for _, in := range instances[3:] {
			if in.DataSecretVersion == instances[0].DataSecretVersion {
				w.t.Errorf("pool %s: instance %s booted with the first data, not the rotated one", name, in.Name)
			}
		}
		for _, in := range instances[3:] {
			kept[name] = append(kept[name], in.Name)
		}
	}

	for name := range pools {
		w.scalePool(name, 2)
	}
	w.waitForPools(pools, 2, 4*time.Minute)
	for name := range pools {
		var left []string
		for _, in := range w.simulatedPool(name).Status.Instances {
			left = append(left, in.Name)
		}
		if !slices.Equal(left, kept[name]) {
			w.t.Errorf("pool %s scaled to 2 kept %v, want the newest %v", name, left, kept[name])
		}
	}
}

// waitForPools waits until every pool (by MachinePool name) has want
// instances whose hosts ran their data and whose Nodes are the MachinePool's
// ready node references, logging the pools when they change.
func (w *workloadCluster) waitForPools(pools map[string]bootstrapv1.Format, want int32, timeout time.Duration) {
	w.t.Helper()
	last := ""
	var problems []string
	names := slices.Sorted(maps.Keys(pools))
	w.waitFor(timeout, fmt.Sprintf("every MachinePool at %d ready instances", want), func() bool {
		var table strings.Builder
		problems = nil
		providerIDs := map[string][]string{}
		for _, name := range names {
			mp := &clusterv1.MachinePool{}
			if err := w.c.Get(context.Background(), objectKey(w.Namespace, name), mp); err != nil {
				w.t.Fatal(err)
			}
			smp := w.simulatedPool(name)
			providerIDs[smp.Name] = smp.Spec.ProviderIDList
			fmt.Fprintf(&table, "  %-28s %-13s replicas %d ready %d nodes %d:", name, pools[name],
				ptr.Deref(mp.Status.Replicas, 0), ptr.Deref(mp.Status.ReadyReplicas, 0), len(mp.Status.NodeRefs))
			for _, in := range smp.Status.Instances {
				fmt.Fprintf(&table, " %s=%s", in.Name, in.HostPhase)
				if in.HostPhase != infrav1.HostBootstrapped {
					problems = append(problems, fmt.Sprintf("%s: %s %s", in.Name, in.HostPhase, in.HostMessage))
				}
			}
			table.WriteString("\n")
			if len(smp.Status.Instances) != int(want) || ptr.Deref(mp.Status.ReadyReplicas, 0) != want || len(mp.Status.NodeRefs) != int(want) {
				problems = append(problems, fmt.Sprintf("%s: %d instances, %d ready, %d node refs", name,
					len(smp.Status.Instances), ptr.Deref(mp.Status.ReadyReplicas, 0), len(mp.Status.NodeRefs)))
			}
		}
		if table.String() != last {
			w.t.Logf("%s pools:\n%s", w.Name, table.String())
			last = table.String()
		}
		return len(problems) == 0 && w.poolNodesMatch(providerIDs)
	}, func() string { return strings.Join(problems, "\n") })
}

// expectPoolConsumers checks which program ran each instance's data, oldest
// first: one format for all, or one per instance.
func (w *workloadCluster) expectPoolConsumers(pool string, formats ...bootstrapv1.Format) {
	w.t.Helper()
	instances := w.simulatedPool(pool).Status.Instances
	if len(formats) != 1 && len(formats) != len(instances) {
		w.t.Fatalf("pool %s: %d instances, %d formats to check", pool, len(instances), len(formats))
	}
	for i, in := range instances {
		f := formats[min(i, len(formats)-1)]
		if in.Consumer != consumers[f] {
			w.t.Errorf("pool %s: instance %s ran its data with %q, want %q (%s)", pool, in.Name, in.Consumer, consumers[f], f)
		}
	}
}

// poolNodesMatch reports whether the workload cluster's Nodes of each pool
// are exactly its instances (the pools' provider ID lists, by
// SimulatedMachinePool name).
func (w *workloadCluster) poolNodesMatch(providerIDs map[string][]string) bool {
	w.t.Helper()
	nodes, err := w.workloadClient().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return false
	}
	byProviderID := map[string]bool{}
	for _, n := range nodes.Items {
		byProviderID[n.Spec.ProviderID] = true
	}
	for name, ids := range providerIDs {
		for _, id := range ids {
			if !byProviderID[id] {
				return false
			}
		}
		prefix := controllers.ProviderID(w.Namespace, name+"-")
		count := 0
		for id := range byProviderID {
			if strings.HasPrefix(id, prefix) {
				count++
			}
		}
		if count != len(ids) {
			return false
		}
	}
	return true
}

// simulatedPool returns the SimulatedMachinePool of a MachinePool.
func (w *workloadCluster) simulatedPool(name string) *infrav1.SimulatedMachinePool {
	w.t.Helper()
	mp := &clusterv1.MachinePool{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, name), mp); err != nil {
		w.t.Fatal(err)
	}
	smp := &infrav1.SimulatedMachinePool{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, mp.Spec.Template.Spec.InfrastructureRef.Name), smp); err != nil {
		w.t.Fatal(err)
	}
	return smp
}

// poolProviderIDs returns the provider IDs of every pool instance in the
// namespace.
func (w *workloadCluster) poolProviderIDs() map[string]bool {
	w.t.Helper()
	var pools infrav1.SimulatedMachinePoolList
	if err := w.c.List(context.Background(), &pools, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, p := range pools.Items {
		for _, id := range p.Spec.ProviderIDList {
			ids[id] = true
		}
	}
	return ids
}

// scalePool sets a MachinePool's replicas.
func (w *workloadCluster) scalePool(name string, replicas int32) {
	w.t.Helper()
	mp := &clusterv1.MachinePool{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, name), mp); err != nil {
		w.t.Fatal(err)
	}
	patch := client.MergeFrom(mp.DeepCopy())
	mp.Spec.Replicas = ptr.To(replicas)
	if err := w.c.Patch(context.Background(), mp, patch); err != nil {
		w.t.Fatal(err)
	}
}

// poolTokenID is the ID (never the secret) of the bootstrap token in a
// pool's KubeadmConfig spec, where the controller records it.
func (w *workloadCluster) poolTokenID(name string) string {
	w.t.Helper()
	cfg := &bootstrapv1.KubeadmConfig{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, name), cfg); err != nil {
		w.t.Fatal(err)
	}
	id, _, _ := strings.Cut(cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token, ".")
	return id
}

// workloadTokenExists reports whether the workload cluster still has the
// bootstrap token with that ID.
func (w *workloadCluster) workloadTokenExists(id string) bool {
	w.t.Helper()
	_, err := w.workloadClient().CoreV1().Secrets(metav1.NamespaceSystem).Get(context.Background(), "bootstrap-token-"+id, metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

// deleteMachinePools deletes the namespace's MachinePools and waits until
// their instances and Nodes are gone.
func (w *workloadCluster) deleteMachinePools() {
	w.t.Helper()
	ctx := context.Background()
	if err := w.c.DeleteAllOf(ctx, &clusterv1.MachinePool{}, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	prefix := controllers.ProviderID(w.Namespace, w.Name+"-pool-")
	w.waitFor(3*time.Minute, "the MachinePools, their instances and Nodes gone", func() bool {
		var pools infrav1.SimulatedMachinePoolList
		if err := w.c.List(ctx, &pools, client.InNamespace(w.Namespace)); err != nil || len(pools.Items) > 0 {
			return false
		}
		nodes, err := w.workloadClient().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, n := range nodes.Items {
			if strings.HasPrefix(n.Spec.ProviderID, prefix) {
				return false
			}
		}
		return true
	})
}
