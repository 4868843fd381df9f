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
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

// owner is the Machine or MachinePool a KubeadmConfig bootstraps: exactly one
// of the two is set.
type owner struct {
	machine *clusterv1.Machine
	pool    *clusterv1.MachinePool
}

func (o owner) object() client.Object {
	if o.machine != nil {
		return o.machine
	}
	return o.pool
}

func (o owner) kind() string {
	if o.machine != nil {
		return "Machine"
	}
	return "MachinePool"
}

func (o owner) String() string { return o.kind() + " " + o.object().GetName() }

// clusterName is the owner's cluster-name label, or spec.clusterName where a
// label is missing.
func (o owner) clusterName() string {
	if name := o.object().GetLabels()[clusterv1.ClusterNameLabel]; name != "" {
		return name
	}
	if o.machine != nil {
		return o.machine.Spec.ClusterName
	}
	return o.pool.Spec.ClusterName
}

func (o owner) isControlPlane() bool {
	_, ok := o.object().GetLabels()[clusterv1.MachineControlPlaneLabel]
	return o.machine != nil && ok
}

func (o owner) kubernetesVersion() string {
	if o.machine != nil {
		return o.machine.Spec.Version
	}
	return o.pool.Spec.Template.Spec.Version
}

// dataSecretName is the data secret the owner already points at (set when
// objects were moved or restored without the KubeadmConfig's status).
func (o owner) dataSecretName() string {
	if o.machine != nil {
		return ptr.Deref(o.machine.Spec.Bootstrap.DataSecretName, "")
	}
	return ptr.Deref(o.pool.Spec.Template.Spec.Bootstrap.DataSecretName, "")
}

// joined reports whether the machine's Node exists: its single-use token has
// served its purpose.
func (o owner) joined() bool {
	return o.machine != nil && o.machine.Status.NodeRef.IsDefined()
}

// hasPendingInstances reports whether a MachinePool wants more instances than
// have become Nodes, so someone may still be joining with the current token.
func (o owner) hasPendingInstances() bool {
	if o.pool == nil {
		return false
	}
	return len(o.pool.Status.NodeRefs) < int(ptr.Deref(o.pool.Spec.Replicas, 1))
}

// ownerNotFoundError is an owner reference to an object that does not exist (yet).
type ownerNotFoundError struct{ kind, name string }

func (e *ownerNotFoundError) Error() string {
	return fmt.Sprintf("owner %s %s not found", e.kind, e.name)
}

// errPoolsDisabled is a config owned by a MachinePool while the gate is off.
var errPoolsDisabled = fmt.Errorf("owned by a MachinePool, but the %s feature gate is disabled", feature.MachinePool)

// isBootstrapOwner reports whether ref names a Machine or a MachinePool, the
// owners a config's reconcile starts from.
func isBootstrapOwner(ref metav1.OwnerReference) bool {
	return groupOf(ref.APIVersion) == clusterv1.GroupVersion.Group && (ref.Kind == "Machine" || ref.Kind == "MachinePool")
}

// getOwner finds the Machine or MachinePool among cfg's owner references;
// nil, nil means none is set yet.
func (r *Reconciler) getOwner(ctx context.Context, cfg *bootstrapv1.KubeadmConfig) (*owner, error) {
	for _, ref := range cfg.GetOwnerReferences() {
		if !isBootstrapOwner(ref) {
			continue
		}
		key := client.ObjectKey{Namespace: cfg.Namespace, Name: ref.Name}
		var o owner
		switch ref.Kind {
		case "Machine":
			o.machine = &clusterv1.Machine{}
		case "MachinePool":
			if !r.Gates.Enabled(feature.MachinePool) {
				return nil, errPoolsDisabled
			}
			o.pool = &clusterv1.MachinePool{}
		}
		if err := r.Client.Get(ctx, key, o.object()); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &ownerNotFoundError{kind: ref.Kind, name: ref.Name}
			}
			return nil, err
		}
		return &o, nil
	}
	return nil, nil
}

// doneReason says why the owner needs its token no more (joined, or never
// will: being deleted, or failed for good), or "".
func (o owner) doneReason() string {
	switch {
	case !o.object().GetDeletionTimestamp().IsZero():
		return "deleting"
	case o.machine != nil && (o.machine.Status.Phase == string(clusterv1.MachinePhaseFailed) ||
		(o.machine.Status.Deprecated != nil && o.machine.Status.Deprecated.V1Beta1 != nil && o.machine.Status.Deprecated.V1Beta1.FailureReason != nil)):
		return "failed"
	case o.joined():
		return "joined"
	}
	return ""
}
