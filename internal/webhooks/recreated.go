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

package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// Reading what owns an object being created, on the API server, to tell a
// re-creation from a new object.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusterclasses,verbs=get

// recreation tells a create that brings back an object that existed before
// (clusterctl move, a restore from a backup) from a new one. Such an object
// was admitted once and is validated as its update to itself would be: a
// rule newer than the object, stricter than the provider that admitted it,
// or a gate switched off since ratchets there as on any update, instead of
// stopping a move half-way. It is read on the API server only for a create
// that full validation refuses.
//
// Only an owner the object really has can vouch for it: an owner reference
// counts when the object it names exists with the UID it gives (clusterctl
// and restores rewrite references to the new UIDs), and a Machine or
// MachinePool must also name this very config as its bootstrap config. A
// label claims nothing, and at most maxOwnerReads references are read, so
// that a create with forged references costs a few reads and admits
// nothing.
type recreation struct {
	// reader reads Clusters, ClusterClasses, Machines and MachinePools
	// live; without one no create is a re-creation.
	reader client.Reader
}

// maxOwnerReads bounds the owners read for one request.
const maxOwnerReads = 4

// of reports whether obj, being created, existed before: an owner that
// vouches for it is paused (a Cluster or ClusterClass, as clusterctl leaves
// them while it moves their objects and as a backup restores them), or is
// the Machine or MachinePool of a KubeadmConfig and already names its data
// secret, which only a config that rendered before can have.
func (r recreation) of(ctx context.Context, obj client.Object) bool {
	if r.reader == nil {
		return false
	}
	reads := 0
	for _, ref := range obj.GetOwnerReferences() {
		if groupOf(ref.APIVersion) != clusterv1.GroupVersion.Group || ref.UID == "" {
			continue
		}
		owner, vouches := vouchingOwner(ref.Kind, obj)
		if owner == nil {
			continue
		}
		if reads++; reads > maxOwnerReads {
			return false
		}
		if r.reader.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, owner) == nil && owner.GetUID() == ref.UID && vouches(owner) {
			return true
		}
	}
	return false
}

// vouchingOwner is an empty object of an owner kind that can vouch for obj,
// and what it must say once read; nil for other kinds.
func vouchingOwner(kind string, obj client.Object) (client.Object, func(client.Object) bool) {
	names := func(ref clusterv1.ContractVersionedObjectReference) bool {
		return ref.APIGroup == bootstrapv1.GroupVersion.Group && ref.Kind == "KubeadmConfig" && ref.Name == obj.GetName()
	}
	switch kind {
	case "Cluster":
		return &clusterv1.Cluster{}, func(o client.Object) bool {
			return ptr.Deref(o.(*clusterv1.Cluster).Spec.Paused, false) || annotations.HasPaused(o)
		}
	case "ClusterClass":
		return &clusterv1.ClusterClass{}, func(o client.Object) bool { return annotations.HasPaused(o) }
	case "Machine":
		return &clusterv1.Machine{}, func(o client.Object) bool {
			b := o.(*clusterv1.Machine).Spec.Bootstrap
			return b.DataSecretName != nil && names(b.ConfigRef)
		}
	case "MachinePool":
		return &clusterv1.MachinePool{}, func(o client.Object) bool {
			b := o.(*clusterv1.MachinePool).Spec.Template.Spec.Bootstrap
			return b.DataSecretName != nil && names(b.ConfigRef)
		}
	}
	return nil, nil
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}
