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

package webhooks_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// refusedHere is a KubeadmConfig spec and annotations this provider refuses
// with the raw gate off, as an object admitted before could be: the raw
// format annotation a KubeadmControlPlane wrote in place onto a config
// whose data existed (a warning then), with commands raw does not take.
func refusedHere(c *bootstrapv1.KubeadmConfig) {
	c.Annotations = map[string]string{bootstrapv1.FormatAnnotation: "raw"}
	c.Spec.Format = bootstrapv1.CloudConfig
	c.Spec.PreKubeadmCommands = []string{"echo hi"}
}

// ownedBy is a reference to the existing owner of kind and name, by its UID
// as clusterctl and restores write them.
func (f *recreateFixture) ownedBy(kind string, owner client.Object) []metav1.OwnerReference {
	f.t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(owner), owner); err != nil {
		f.t.Fatal(err)
	}
	return []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: owner.GetName(), UID: owner.GetUID()}}
}

func named(name string, o client.Object) client.Object {
	o.SetName(name)
	o.SetNamespace("default")
	return o
}

// machine creates a Machine whose bootstrap config is the KubeadmConfig
// config, its data named or not.
func (f *recreateFixture) machine(name, config string, withData bool) {
	f.t.Helper()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: clusterv1.MachineSpec{
			ClusterName:       f.cluster,
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: config}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachine", Name: name},
		},
	}
	if withData {
		m.Spec.Bootstrap.DataSecretName = ptr.To(name)
	}
	f.create(m)
}

type recreateFixture struct {
	t       *testing.T
	cluster string
}

func (f *recreateFixture) create(o client.Object) {
	f.t.Helper()
	if err := env.Client.Create(context.Background(), o); err != nil {
		f.t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

func (f *recreateFixture) setPaused(paused bool) {
	f.t.Helper()
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: f.cluster}, c); err != nil {
		f.t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Paused = ptr.To(paused)
	if err := env.Client.Patch(context.Background(), c, patch); err != nil {
		f.t.Fatal(err)
	}
}

// TestRecreatedObjectsAreAdmittedAsTheirUpdate: clusterctl move and restores
// create again what was admitted before, with a paused Cluster (or
// ClusterClass) and, for a KubeadmConfig, a Machine that already names its
// data. Such a create is validated as the object's update to itself would
// be, so an object the rules now refuse moves whole instead of stopping the
// move half-way; the same object created new is refused.
func TestRecreatedObjectsAreAdmittedAsTheirUpdate(t *testing.T) {
	ctx := context.Background()
	setGates(t, true, false)
	nameSeq++
	f := &recreateFixture{t: t, cluster: fmt.Sprintf("moved-%d", nameSeq)}
	f.create(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: f.cluster, Namespace: "default"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}})

	// A Machine that names its data: its config rendered before. Only the
	// config the Machine names, referring to it by its UID, is vouched for.
	m0, m1, m2 := f.cluster+"-m0", f.cluster+"-m1", f.cluster+"-m2"
	f.machine(m0, m0, true)
	f.machine(m1, m1, false)
	f.machine(m2, "another", true)
	forged := f.ownedBy("Machine", named(m0, &clusterv1.Machine{}))
	forged[0].UID = "00000000-0000-0000-0000-000000000001"
	for _, tc := range []struct {
		name, config string
		owners       []metav1.OwnerReference
		admit        bool
	}{
		{"a reference by its Machine's name with another UID", m0, forged, false},
		{"its Machine names its data", m0, f.ownedBy("Machine", named(m0, &clusterv1.Machine{})), true},
		{"its Machine has no data yet", m1, f.ownedBy("Machine", named(m1, &clusterv1.Machine{})), false},
		{"the Machine names another config", m2, f.ownedBy("Machine", named(m2, &clusterv1.Machine{})), false},
	} {
		c := config(bootstrapv1.CloudConfig)
		c.Name, c.OwnerReferences = tc.config, tc.owners
		refusedHere(c)
		if err := env.Client.Create(ctx, c); (err == nil) != tc.admit {
			t.Errorf("%s: admitted %v, want %v: %v", tc.name, err == nil, tc.admit, err)
		}
	}

	// Objects of a Cluster that clusterctl paused to move it.
	cluster := f.ownedBy("Cluster", named(f.cluster, &clusterv1.Cluster{}))
	newObjects := func() []client.Object {
		c := config(bootstrapv1.CloudConfig)
		c.OwnerReferences = cluster
		refusedHere(c)
		tmpl := template(bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.Ignition, DiskSetup: upstreambootstrapv1.DiskSetup{
			Partitions: []upstreambootstrapv1.Partition{{Device: "/dev/sdb", DiskLayout: []upstreambootstrapv1.PartitionSpec{{Percentage: 50}}}}}})
		tmpl.OwnerReferences = cluster
		k := kcp(map[string]string{bootstrapv1.FormatAnnotation: "raw"})
		k.OwnerReferences = cluster
		return []client.Object{c, tmpl, k}
	}
	// What only claims the paused Cluster: its label, or its name without
	// its UID, and a hundred references that cost a read each.
	claims := func() []client.Object {
		byLabel := config(bootstrapv1.CloudConfig)
		byLabel.Labels = map[string]string{clusterv1.ClusterNameLabel: f.cluster}
		refusedHere(byLabel)
		byName := config(bootstrapv1.CloudConfig)
		byName.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: f.cluster, UID: "00000000-0000-0000-0000-000000000002"}}
		refusedHere(byName)
		many := config(bootstrapv1.CloudConfig)
		for i := range 100 {
			many.OwnerReferences = append(many.OwnerReferences, metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: fmt.Sprintf("m%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))})
		}
		many.OwnerReferences = append(many.OwnerReferences, cluster...)
		refusedHere(many)
		return []client.Object{byLabel, byName, many}
	}
	for _, o := range newObjects() {
		if err := env.Client.Create(ctx, o); err == nil {
			t.Errorf("%T %s created new: admitted", o, o.GetName())
		}
	}
	f.setPaused(true)
	for _, o := range newObjects() {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Errorf("%T %s brought back with its Cluster paused: %v", o, o.GetName(), err)
		}
	}
	for i, o := range claims() {
		if err := env.Client.Create(ctx, o); err == nil {
			t.Errorf("claim %d on the paused Cluster without being its: admitted", i)
		}
	}
	f.setPaused(false)

	// A template of a ClusterClass that clusterctl paused.
	ref := func(kind string) clusterv1.ClusterClassTemplateReference {
		return clusterv1.ClusterClassTemplateReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: kind, Name: "t"}
	}
	cc := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Name: f.cluster + "-class", Namespace: "default",
		Annotations: map[string]string{clusterv1.PausedAnnotation: ""}},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{TemplateRef: ref("TestClusterTemplate")},
			ControlPlane:   clusterv1.ControlPlaneClass{TemplateRef: ref("TestControlPlaneTemplate")},
		}}
	f.create(cc)
	tmpl := template(bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.Raw})
	tmpl.OwnerReferences = f.ownedBy("ClusterClass", cc)
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Errorf("a template of a paused ClusterClass: %v", err)
	}
}
