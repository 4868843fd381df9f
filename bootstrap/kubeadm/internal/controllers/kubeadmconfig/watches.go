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
	"maps"
	"reflect"
	"slices"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

// The watches wake a KubeadmConfig up only for changes that can change what
// its reconcile does. Waiting states (infrastructure, control-plane
// initialization, endpoint) therefore need no polling, and the controller's
// own status writes and the frequent unrelated status updates of Machines and
// Clusters cost nothing.

func updateOnly(changed func(oldObj, newObj client.Object) bool) predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return changed(e.ObjectOld, e.ObjectNew) }}
}

// resync is an informer's periodic resync (--sync-period): the same object
// delivered again. A KubeadmConfig's resync is let through, so that every
// config is revisited once per period whatever event was missed.
func resync(o, n client.Object) bool { return o.GetResourceVersion() == n.GetResourceVersion() }

func metadataChanged(o, n client.Object) bool {
	return !maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
		!reflect.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) || !o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}

// configChanged skips status-only updates of KubeadmConfigs and the token
// written into the spec: those are this controller's own writes.
var configChanged = updateOnly(func(o, n client.Object) bool {
	return resync(o, n) || metadataChanged(o, n) ||
		(o.GetGeneration() != n.GetGeneration() && !onlyTokenChanged(o.(*bootstrapv1.KubeadmConfig), n.(*bootstrapv1.KubeadmConfig)))
})

// onlyTokenChanged reports whether two specs differ in the bootstrap token only.
func onlyTokenChanged(o, n *bootstrapv1.KubeadmConfig) bool {
	a, b := o.Spec.DeepCopy(), n.Spec.DeepCopy()
	a.JoinConfiguration.Discovery.BootstrapToken.Token = ""
	b.JoinConfiguration.Discovery.BootstrapToken.Token = ""
	return reflect.DeepEqual(a, b)
}

var machineChanged = updateOnly(func(o, n client.Object) bool {
	om, nm := o.(*clusterv1.Machine), n.(*clusterv1.Machine)
	return metadataChanged(om, nm) || om.Spec.Version != nm.Spec.Version ||
		!reflect.DeepEqual(om.Spec.Bootstrap, nm.Spec.Bootstrap) || om.Status.NodeRef != nm.Status.NodeRef ||
		(owner{machine: om}).doneReason() != (owner{machine: nm}).doneReason()
})

var machinePoolChanged = updateOnly(func(o, n client.Object) bool {
	op, np := o.(*clusterv1.MachinePool), n.(*clusterv1.MachinePool)
	return metadataChanged(op, np) || !reflect.DeepEqual(op.Spec.Replicas, np.Spec.Replicas) ||
		op.Spec.Template.Spec.Version != np.Spec.Template.Spec.Version ||
		!reflect.DeepEqual(op.Spec.Template.Spec.Bootstrap, np.Spec.Template.Spec.Bootstrap) ||
		len(op.Status.NodeRefs) != len(np.Status.NodeRefs)
})

var clusterChanged = updateOnly(func(o, n client.Object) bool {
	oc, nc := o.(*clusterv1.Cluster), n.(*clusterv1.Cluster)
	return metadataChanged(oc, nc) ||
		ptr.Deref(oc.Spec.Paused, false) != ptr.Deref(nc.Spec.Paused, false) ||
		ptr.Deref(oc.Status.Initialization.InfrastructureProvisioned, false) != ptr.Deref(nc.Status.Initialization.InfrastructureProvisioned, false) ||
		controlPlaneInitialized(oc) != controlPlaneInitialized(nc) ||
		oc.Spec.ControlPlaneEndpoint != nc.Spec.ControlPlaneEndpoint ||
		oc.Spec.ControlPlaneRef != nc.Spec.ControlPlaneRef ||
		!reflect.DeepEqual(oc.Spec.ClusterNetwork, nc.Spec.ClusterNetwork)
})

func configRequest(namespace string, ref clusterv1.ContractVersionedObjectReference) []ctrl.Request {
	if !ref.IsDefined() || ref.Kind != "KubeadmConfig" || ref.APIGroup != bootstrapv1.GroupVersion.Group {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: namespace, Name: ref.Name}}}
}

func machineToConfig(_ context.Context, o client.Object) []ctrl.Request {
	m := o.(*clusterv1.Machine)
	return configRequest(m.Namespace, m.Spec.Bootstrap.ConfigRef)
}

// hasBootstrapOwner reports whether a config has the Machine or MachinePool
// owner its reconcile starts from. Until then there is nothing to do: a
// MachineSet creates a config owned by itself and the Machine controller
// hands it to its Machine afterwards (an update this controller sees). A
// reconcile spent on such a config is not free: Cluster API's reconciler
// rate limit (ReconcilerRateLimiting, on by default) lets each config be
// reconciled at most once a second, so the reconcile that finds the owner
// would wait out the rest of that second.
func hasBootstrapOwner(o client.Object) bool {
	return slices.ContainsFunc(o.GetOwnerReferences(), isBootstrapOwner)
}

// machineToOwnedConfig maps a Machine to its config when the cache holds the
// config with its owner; otherwise the config's own event comes later, and a
// reconcile now would only delay that one (see hasBootstrapOwner).
func (r *Reconciler) machineToOwnedConfig(ctx context.Context, o client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, req := range machineToConfig(ctx, o) {
		cfg := &bootstrapv1.KubeadmConfig{}
		if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil || !hasBootstrapOwner(cfg) {
			continue
		}
		out = append(out, req)
	}
	return out
}

func machinePoolToConfig(_ context.Context, o client.Object) []ctrl.Request {
	p := o.(*clusterv1.MachinePool)
	return configRequest(p.Namespace, p.Spec.Template.Spec.Bootstrap.ConfigRef)
}

// clusterToConfigs maps a Cluster to the KubeadmConfigs of its Machines and
// MachinePools (from the cache), its control-plane Machines' first: the work
// queue serves one event's requests in order, and a cluster's workers can do
// no more than record that they wait until its first control-plane machine
// has its data (in a burst of 10,000 Machines, the initializing one came
// after 86 s of such writes).
func (r *Reconciler) clusterToConfigs(ctx context.Context, o client.Object) []ctrl.Request {
	selector := []client.ListOption{client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, selector...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Machines of a Cluster failed", "Cluster", client.ObjectKeyFromObject(o))
		return nil
	}
	var out, workers []ctrl.Request
	for i := range machines.Items {
		m := &machines.Items[i]
		if (owner{machine: m}).isControlPlane() {
			out = append(out, machineToConfig(ctx, m)...)
		} else {
			workers = append(workers, machineToConfig(ctx, m)...)
		}
	}
	out = append(out, workers...)
	if r.Gates.Enabled(feature.MachinePool) {
		pools := &clusterv1.MachinePoolList{}
		if err := r.Client.List(ctx, pools, selector...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the MachinePools of a Cluster failed", "Cluster", client.ObjectKeyFromObject(o))
			return out
		}
		for i := range pools.Items {
			out = append(out, machinePoolToConfig(ctx, &pools.Items[i])...)
		}
	}
	return out
}
