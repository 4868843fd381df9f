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

package kubeadmconfig

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

// TestResyncRevisitsConfigs: the informer's periodic resync (--sync-period)
// delivers each KubeadmConfig again unchanged; it must reach the reconciler,
// while this controller's own status writes (a new resource version, same
// generation) do not.
func TestResyncRevisitsConfigs(t *testing.T) {
	cfg := &bootstrapv1.KubeadmConfig{}
	cfg.ResourceVersion, cfg.Generation = "10", 2
	if !configChanged.Update(event.UpdateEvent{ObjectOld: cfg, ObjectNew: cfg.DeepCopy()}) {
		t.Error("a resync was filtered out")
	}
	statusWrite := cfg.DeepCopy()
	statusWrite.ResourceVersion = "11"
	if configChanged.Update(event.UpdateEvent{ObjectOld: cfg, ObjectNew: statusWrite}) {
		t.Error("a status-only write woke the config")
	}
}

// TestConfigWaitsForItsMachineOwner: a config Cluster API has not yet handed
// to its Machine (a MachineSet's, or nobody's) is not reconciled, neither on
// its own events nor on its Machine's; once the Machine owns it, both wake
// it. A reconcile spent before would hold back the one that matters by the
// reconciler rate limit's second.
func TestConfigWaitsForItsMachineOwner(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := bootstrapv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cfg := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Name: "m-0", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: "ms", UID: "ms-uid"}}}}
	machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m-0", Namespace: "ns"}}
	machine.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: "m-0"}
	ctx := context.Background()

	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Client: c}
	if reqs := r.machineToOwnedConfig(ctx, machine); len(reqs) != 0 {
		t.Errorf("a Machine whose config is not in the cache woke it: %v", reqs)
	}
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if hasBootstrapOwner(cfg) {
		t.Error("a config owned by its MachineSet passes the filter")
	}
	if reqs := r.machineToOwnedConfig(ctx, machine); len(reqs) != 0 {
		t.Errorf("a Machine woke a config it does not own yet: %v", reqs)
	}

	cfg.OwnerReferences = append(cfg.OwnerReferences, metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "m-0", UID: "m-uid", Controller: ptr.To(true)})
	if err := c.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if !hasBootstrapOwner(cfg) {
		t.Error("a config owned by its Machine is filtered out")
	}
	if reqs := r.machineToOwnedConfig(ctx, machine); len(reqs) != 1 || reqs[0].Name != "m-0" {
		t.Errorf("the Machine must wake the config it owns: %v", reqs)
	}
	pooled := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: "p", UID: "p-uid"}}}}
	if !hasBootstrapOwner(pooled) {
		t.Error("a MachinePool's config is filtered out")
	}
}

// TestClusterEventsServeControlPlaneFirst: a Cluster's change wakes its
// control-plane Machines' configs before its workers', whatever order the
// cache lists them in.
func TestClusterEventsServeControlPlaneFirst(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clusterv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	ctx := context.Background()
	for i, name := range []string{"a-worker", "b-control-plane", "c-worker", "d-control-plane"} {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}}}
		if i%2 == 1 {
			m.Labels[clusterv1.MachineControlPlaneLabel] = ""
		}
		m.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	r := &Reconciler{Client: c, Gates: feature.NewFeatureGates()}
	reqs := r.clusterToConfigs(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}})
	var names []string
	for _, req := range reqs {
		names = append(names, req.Name)
	}
	if len(names) != 4 || !strings.HasSuffix(names[0], "control-plane") || !strings.HasSuffix(names[1], "control-plane") {
		t.Fatalf("control-plane configs must come first: %v", names)
	}
}
