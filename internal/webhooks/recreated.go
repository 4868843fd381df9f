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
type recreation struct {
	// reader reads Clusters, ClusterClasses, Machines and MachinePools
	// live; without one no create is a re-creation.
	reader client.Reader
}

// of reports whether obj, being created, existed before: the Cluster or
// ClusterClass it belongs to is paused, as clusterctl leaves them while it
// moves their objects and as a backup restores them, or (a KubeadmConfig)
// its Machine or MachinePool already names its data secret, which only a
// config that rendered before can have.
func (r recreation) of(ctx context.Context, obj client.Object) bool {
	if r.reader == nil {
		return false
	}
	if name := obj.GetLabels()[clusterv1.ClusterNameLabel]; name != "" && r.clusterPaused(ctx, obj.GetNamespace(), name) {
		return true
	}
	for _, ref := range obj.GetOwnerReferences() {
		if groupOf(ref.APIVersion) != clusterv1.GroupVersion.Group {
			continue
		}
		key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}
		switch ref.Kind {
		case "Cluster":
			if r.clusterPaused(ctx, key.Namespace, key.Name) {
				return true
			}
		case "ClusterClass":
			cc := &clusterv1.ClusterClass{}
			if r.reader.Get(ctx, key, cc) == nil && annotations.HasPaused(cc) {
				return true
			}
		case "Machine":
			m := &clusterv1.Machine{}
			if r.reader.Get(ctx, key, m) == nil && m.Spec.Bootstrap.DataSecretName != nil {
				return true
			}
		case "MachinePool":
			p := &clusterv1.MachinePool{}
			if r.reader.Get(ctx, key, p) == nil && p.Spec.Template.Spec.Bootstrap.DataSecretName != nil {
				return true
			}
		}
	}
	return false
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

func (r recreation) clusterPaused(ctx context.Context, namespace, name string) bool {
	c := &clusterv1.Cluster{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, c); err != nil {
		return false
	}
	return ptr.Deref(c.Spec.Paused, false) || annotations.HasPaused(c)
}
