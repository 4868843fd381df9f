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

package workload

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/controllers"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// WaitForPools waits until every pool (by MachinePool name) has want
// instances whose hosts ran their data and whose Nodes are the MachinePool's
// ready node references, logging the pools when they change.
func (w *Cluster) WaitForPools(pools map[string]bootstrapv1.Format, want int32, timeout time.Duration) {
	w.t.Helper()
	last := ""
	var problems []string
	names := slices.Sorted(maps.Keys(pools))
	w.WaitFor(timeout, fmt.Sprintf("every MachinePool at %d ready instances", want), func() bool {
		var table strings.Builder
		problems = nil
		providerIDs := map[string][]string{}
		for _, name := range names {
			mp := w.machinePool(name)
			smp := w.SimulatedPool(name)
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
		return len(problems) == 0 && w.PoolNodesMatch(providerIDs)
	}, func() string { return strings.Join(problems, "\n") })
}

// WaitForPoolRollout waits until every instance of the pool was launched
// from the data secret the MachinePool names now, then until the pool has
// want ready instances (WaitForPools).
func (w *Cluster) WaitForPoolRollout(pool string, format bootstrapv1.Format, want int32, timeout time.Duration) {
	w.t.Helper()
	outdated := func() []string {
		current := w.PoolDataSecretName(pool)
		var out []string
		for _, in := range w.SimulatedPool(pool).Status.Instances {
			if in.DataSecretName != current {
				out = append(out, fmt.Sprintf("%s launched from %q, the pool names %q", in.Name, in.DataSecretName, current))
			}
		}
		return out
	}
	w.WaitFor(timeout, "every instance of "+pool+" launched from the pool's data secret", func() bool { return len(outdated()) == 0 },
		func() string { return strings.Join(outdated(), "\n") })
	w.WaitForPools(map[string]bootstrapv1.Format{pool: format}, want, timeout)
}

// ExpectPoolRevision checks that every instance of the pool runs the
// workerRevision its topology sets, as a freshly bootstrapped machine would:
// the kubeadm patch on its host, the kubelet flag in kubeadm-flags.env, the
// Node's label and the running kubelet's containerLogMaxSize.
func (w *Cluster) ExpectPoolRevision(pool, revision string) {
	w.t.Helper()
	cs := w.WorkloadClient()
	for _, in := range w.SimulatedPool(pool).Status.Instances {
		patch := w.OnHost(in.Name, "cat", objects.RevisionPatchFile)
		if want := "containerLogMaxSize: " + revision + "Mi"; strings.TrimSpace(patch) != want {
			w.t.Errorf("pool %s: instance %s: %s holds %q, want %q", pool, in.Name, objects.RevisionPatchFile, patch, want)
		}
		label := objects.RevisionLabel + "=" + revision
		if flags := w.OnHost(in.Name, "cat", "/var/lib/kubelet/kubeadm-flags.env"); !strings.Contains(flags, label) {
			w.t.Errorf("pool %s: instance %s: the kubelet's flags lack --node-labels with %s: %s", pool, in.Name, label, flags)
		}
		node, err := cs.CoreV1().Nodes().Get(context.Background(), in.Name, metav1.GetOptions{})
		if err != nil {
			w.t.Errorf("pool %s: instance %s: %v", pool, in.Name, err)
			continue
		}
		if got := node.Labels[objects.RevisionLabel]; got != revision {
			w.t.Errorf("pool %s: Node %s has label %s=%q, want %q", pool, in.Name, objects.RevisionLabel, got, revision)
		}
		kc, err := runningKubeletConfig(cs, in.Name)
		if err != nil {
			w.t.Error(err)
			continue
		}
		if want := revision + "Mi"; kc.ContainerLogMaxSize != want {
			w.t.Errorf("pool %s: the kubelet of %s runs with containerLogMaxSize %q, want %q (the kubeadm patch)", pool, in.Name, kc.ContainerLogMaxSize, want)
		}
	}
}

// ExpectPoolConsumers checks which program ran each instance's data, oldest
// first: one format for all, or one per instance.
func (w *Cluster) ExpectPoolConsumers(pool string, formats ...bootstrapv1.Format) {
	w.t.Helper()
	instances := w.SimulatedPool(pool).Status.Instances
	if len(formats) != 1 && len(formats) != len(instances) {
		w.t.Fatalf("pool %s: %d instances, %d formats to check", pool, len(instances), len(formats))
	}
	for i, in := range instances {
		f := formats[min(i, len(formats)-1)]
		if in.Consumer != host.ConsumerName(f) {
			w.t.Errorf("pool %s: instance %s ran its data with %q, want %q (%s)", pool, in.Name, in.Consumer, host.ConsumerName(f), f)
		}
	}
}

// PoolNodesMatch reports whether the workload cluster's Nodes of each pool
// are exactly its instances (the pools' provider ID lists, by
// SimulatedMachinePool name).
func (w *Cluster) PoolNodesMatch(providerIDs map[string][]string) bool {
	w.t.Helper()
	nodes, err := w.WorkloadClient().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
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

// machinePool reads the namespace's MachinePool of that name.
func (w *Cluster) machinePool(name string) *clusterv1.MachinePool {
	w.t.Helper()
	mp := &clusterv1.MachinePool{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, name), mp); err != nil {
		w.t.Fatal(err)
	}
	return mp
}

// SimulatedPool returns the SimulatedMachinePool of a MachinePool.
func (w *Cluster) SimulatedPool(name string) *infrav1.SimulatedMachinePool {
	w.t.Helper()
	mp := w.machinePool(name)
	smp := &infrav1.SimulatedMachinePool{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, mp.Spec.Template.Spec.InfrastructureRef.Name), smp); err != nil {
		w.t.Fatal(err)
	}
	return smp
}

// PoolProviderIDs returns the provider IDs of every pool instance in the
// namespace.
func (w *Cluster) PoolProviderIDs() map[string]bool {
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

// ScalePool sets a MachinePool's replicas.
func (w *Cluster) ScalePool(name string, replicas int32) {
	w.t.Helper()
	mp := w.machinePool(name)
	patch := client.MergeFrom(mp.DeepCopy())
	mp.Spec.Replicas = ptr.To(replicas)
	if err := w.c.Patch(context.Background(), mp, patch); err != nil {
		w.t.Fatal(err)
	}
}

// PoolTokenID is the ID (never the secret) of the bootstrap token in a
// pool's KubeadmConfig spec, where the controller records it.
func (w *Cluster) PoolTokenID(name string) string {
	id, _, _ := strings.Cut(w.poolToken(name), ".")
	return id
}

// poolToken is the whole token in the pool's KubeadmConfig spec.
func (w *Cluster) poolToken(name string) string {
	w.t.Helper()
	mp := w.machinePool(name)
	// Under a ClusterClass the pool's KubeadmConfig has a name of its own.
	cfg := &bootstrapv1.KubeadmConfig{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, mp.Spec.Template.Spec.Bootstrap.ConfigRef.Name), cfg); err != nil {
		w.t.Fatal(err)
	}
	return cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token
}
