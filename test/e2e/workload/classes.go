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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/availability"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
)

// ClassPool returns the name of the MachinePool the topology made for a
// MachinePool topology.
func (w *Cluster) ClassPool(topologyName string) string {
	w.t.Helper()
	var pools clusterv1.MachinePoolList
	if err := w.c.List(context.Background(), &pools, client.InNamespace(w.Namespace),
		client.MatchingLabels{clusterv1.ClusterTopologyMachinePoolNameLabel: topologyName}); err != nil || len(pools.Items) != 1 {
		w.t.Fatalf("MachinePool of topology %s: %d found, %v", topologyName, len(pools.Items), err)
	}
	return pools.Items[0].Name
}

// PoolDataFormat is the format the MachinePool's data secret was rendered in.
func (w *Cluster) PoolDataFormat(pool string) bootstrapv1.Format {
	w.t.Helper()
	name := w.PoolDataSecretName(pool)
	if name == "" {
		return ""
	}
	s := &corev1.Secret{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, name), s); err != nil {
		return ""
	}
	return bootstrapv1.Format(s.Data["format"])
}

// PoolDataSecretName is the data secret the MachinePool names, "" before
// Cluster API copied it from the pool's KubeadmConfig.
func (w *Cluster) PoolDataSecretName(pool string) string {
	w.t.Helper()
	mp := w.machinePool(pool)
	return ptr.Deref(mp.Spec.Template.Spec.Bootstrap.DataSecretName, "")
}

// ClassClusterInput says how NewClassCluster makes a cluster.
type ClassClusterInput struct {
	Stack *stack.Stack
	// Management is the management cluster the cluster is made in; the
	// stack's own when nil.
	Management *stack.Management
	Name       string
	// ControlPlaneReplicas and ControlPlaneFormat are the topology's
	// control plane; Workers its MachineDeployments.
	ControlPlaneReplicas int32
	ControlPlaneFormat   bootstrapv1.Format
	Workers              []objects.ClassWorkers
}

// NewClassCluster creates the ClusterClass (stack.ClusterClassObjects), waits
// until Cluster API reconciled it (its variables are known), then creates a
// Cluster of it.
func NewClassCluster(t testing.TB, in ClassClusterInput) *Cluster {
	t.Helper()
	w := NewCluster(t, ClusterInput{Stack: in.Stack, Management: in.Management, Name: in.Name, Objects: func(w *Cluster) []client.Object {
		return append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.Namespace}}}, w.Objects.ClusterClassObjects()...)
	}})
	if err := WaitForClusterClass(context.Background(), w.c, w.Namespace, w.Name); err != nil {
		t.Fatalf("ClusterClass %s not reconciled: %v", w.Name, err)
	}
	w.Create(w.Objects.ClassCluster(in.ControlPlaneReplicas, in.ControlPlaneFormat, in.Workers...))
	return w
}

// RenderedMachine is a Machine and the format its data secret says it was
// rendered in.
type RenderedMachine struct {
	clusterv1.Machine
	format bootstrapv1.Format
}

// RenderedMachines returns the namespace's Machines whose data secret exists,
// with its format, and how many Machines there are in all.
func (w *Cluster) RenderedMachines() (rendered []RenderedMachine, all int) {
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
		rendered = append(rendered, RenderedMachine{Machine: m, format: bootstrapv1.Format(s.Data["format"])})
	}
	return rendered, len(machines.Items)
}

// byMachineDeployment groups rendered machines' formats by the topology's
// MachineDeployment name ("" for the control plane).
func byMachineDeployment(rendered []RenderedMachine) map[string][]bootstrapv1.Format {
	out := map[string][]bootstrapv1.Format{}
	for _, m := range rendered {
		md := m.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]
		out[md] = append(out[md], m.format)
	}
	return out
}

// ClassFormats returns the formats each machine's data secret says it
// rendered, by the topology's MachineDeployment name ("" for the control
// plane).
func (w *Cluster) ClassFormats() map[string][]bootstrapv1.Format {
	w.t.Helper()
	rendered, _ := w.RenderedMachines()
	return byMachineDeployment(rendered)
}

// ExpectClassFormats checks, for each machine, the format its data was
// rendered in against want (by MachineDeployment, "" for the control plane)
// and what the class's format-specific patch left on its host: the
// FormatPatchFile its format's own means wrote, and no such file on raw
// machines (the raw format has no means, and the patch is not applied).
func (w *Cluster) ExpectClassFormats(want map[string]bootstrapv1.Format) {
	w.t.Helper()
	rendered, all := w.RenderedMachines()
	if len(rendered) != all {
		w.t.Fatalf("%d of %d machines have their data secret", len(rendered), all)
	}
	for _, m := range rendered {
		md := m.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]
		if m.format != want[md] {
			w.t.Errorf("machine %s (%q): rendered %s, want %s", m.Name, md, m.format, want[md])
		}
		written := strings.TrimSpace(w.OnHost(m.Name, "sh", "-c", "cat "+objects.FormatPatchFile+" 2>/dev/null || echo none"))
		wantWritten := "none"
		if m.format == bootstrapv1.Ignition || (m.format == bootstrapv1.CloudConfig && md != "") {
			wantWritten = string(m.format)
		}
		if written != wantWritten {
			w.t.Errorf("machine %s (%s): %s holds %q, want %q", m.Name, m.format, objects.FormatPatchFile, written, wantWritten)
		}
	}
	w.t.Logf("formats by MachineDeployment (\"\": control plane): %v", byMachineDeployment(rendered))
}

// ChangeTopology updates the Cluster's topology.
func (w *Cluster) ChangeTopology(change func(*clusterv1.Topology)) {
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

// SetVariable sets a variable of a topology's list to value.
func SetVariable(variables *[]clusterv1.ClusterVariable, name string, value any) {
	for i := range *variables {
		if (*variables)[i].Name == name {
			(*variables)[i].Value = *objects.JSONValue(value)
			return
		}
	}
	*variables = append(*variables, clusterv1.ClusterVariable{Name: name, Value: *objects.JSONValue(value)})
}

// Availability polls the workload cluster through its control-plane
// endpoint (a read that reaches etcd) every second, recording failures.
type Availability struct{ probe *availability.Probe }

// WatchAvailability starts polling the cluster through its control-plane
// endpoint until Stop.
func (w *Cluster) WatchAvailability() *Availability {
	w.t.Helper()
	p, err := availability.Watch(w.RestConfig())
	if err != nil {
		w.t.Fatal(err)
	}
	return &Availability{probe: p}
}

// Stop ends the polling and fails the test if the cluster did not answer for
// longer than maxOutage at a stretch.
func (a *Availability) Stop(t testing.TB, maxOutage time.Duration) {
	t.Helper()
	r := a.probe.Stop()
	t.Logf("availability: %s", r)
	if r.LongestOutage > maxOutage {
		t.Errorf("the workload cluster did not answer for %s at a stretch (allowed %s)", r.LongestOutage, maxOutage)
	}
}

// WaitForClusterClass waits until Cluster API reconciled a ClusterClass (its
// variables are known): Cluster API's admission checks a Cluster's
// variables against them, and defers the check while they are not.
func WaitForClusterClass(ctx context.Context, c client.Client, namespace, name string) error {
	class := &clusterv1.ClusterClass{}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, class); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return class.Status.ObservedGeneration == class.Generation &&
			conditions.IsTrue(class, clusterv1.ClusterClassVariablesReadyCondition), nil
	})
}
