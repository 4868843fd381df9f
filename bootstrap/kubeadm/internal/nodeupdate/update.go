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

package nodeupdate

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
)

// Updater applies a machine's desired KubeadmConfig to its node.
type Updater struct {
	// Reader reads the management cluster live: Machines, Clusters, the
	// Secrets files come from, the control plane's version.
	Reader       client.Reader
	ClusterCache clustercache.ClusterCache
	Runner       Runner
	// KubernetesBinaries is where nodes get the kubeadm and kubelet of a
	// Kubernetes version they move to (rawv1.KubernetesBinaries); empty:
	// versions do not change in place.
	KubernetesBinaries string
}

// Update moves the in-place update of machine to desired along, from the
// plan of desired as a joined machine. Errors name objects and fields,
// never values.
func (u *Updater) Update(ctx context.Context, machine client.ObjectKey, desired *bootstrapv1.KubeadmConfig) (Status, error) {
	m := &clusterv1.Machine{}
	if err := u.Reader.Get(ctx, machine, m); err != nil {
		return Status{}, fmt.Errorf("reading Machine %s: %w", machine, err)
	}
	if !m.Status.NodeRef.IsDefined() {
		return Status{State: Failed, Message: fmt.Sprintf("Machine %s has no Node to update", machine)}, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := u.Reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster); err != nil {
		return Status{}, fmt.Errorf("reading Cluster %s/%s: %w", m.Namespace, m.Spec.ClusterName, err)
	}
	in, err := u.input(ctx, m, cluster, desired)
	if err != nil {
		return Status{}, err
	}
	p, err := plan.Build(*in)
	if err != nil {
		return Status{}, fmt.Errorf("planning the update of Machine %s: %w", machine, err)
	}
	order, doc, err := Order(p, u.KubernetesBinaries)
	if err != nil {
		return Status{}, err
	}
	c, err := u.ClusterCache.GetUncachedClient(ctx, util.ObjectKey(cluster))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		// The cluster cache connects in the background (a manager that just
		// started): nothing has failed yet.
		return Status{State: InProgress, Message: fmt.Sprintf("Waiting for the connection to the workload cluster of Machine %s", machine)}, nil
	}
	if err != nil {
		return Status{}, fmt.Errorf("reaching the workload cluster of %s: %w", machine, err)
	}
	st, err := u.Runner.Run(ctx, c, m.Status.NodeRef.Name, order, doc)
	if err != nil {
		// The workload cluster does not answer: an update of a control
		// plane restarts its API server. Nothing has failed on the node.
		return Status{State: InProgress, Message: fmt.Sprintf("Waiting for the API server of the workload cluster of Machine %s: %v", machine, err)}, nil
	}
	return st, nil
}

// input is what a fresh machine of the desired spec would be planned
// from, as a machine that has joined.
func (u *Updater) input(ctx context.Context, m *clusterv1.Machine, cluster *clusterv1.Cluster, desired *bootstrapv1.KubeadmConfig) (*plan.Input, error) {
	spec, errs := fieldrules.Resolve(desired.Annotations, &desired.Spec, field.NewPath("metadata", "annotations"))
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	action := plan.ActionJoin
	if util.IsControlPlaneMachine(m) {
		action = plan.ActionJoinControlPlane
	}
	cpVersion, err := u.controlPlaneVersion(ctx, cluster, spec)
	if err != nil {
		return nil, err
	}
	return &plan.Input{
		Spec:   spec,
		Action: action,
		Cluster: plan.Cluster{
			Name:                cluster.Name,
			KubernetesVersion:   m.Spec.Version,
			ControlPlaneVersion: cpVersion,
			ServiceDomain:       cluster.Spec.ClusterNetwork.ServiceDomain,
		},
		ReadSecret: func(ref plan.SecretRef) ([]byte, error) {
			s := &corev1.Secret{}
			if err := u.Reader.Get(ctx, client.ObjectKey{Namespace: desired.Namespace, Name: ref.Name}, s); err != nil {
				return nil, err
			}
			b, ok := s.Data[ref.Key]
			if !ok {
				return nil, fmt.Errorf("Secret %s has no key %s", ref.Name, ref.Key)
			}
			return b, nil
		},
		Joined: true,
	}, nil
}

// controlPlaneVersion is the control plane's version, which templated
// files may use, read as the controller reads it for first boot.
func (u *Updater) controlPlaneVersion(ctx context.Context, cluster *clusterv1.Cluster, spec *bootstrapv1.KubeadmConfigSpec) (string, error) {
	ref := cluster.Spec.ControlPlaneRef
	if !plan.TemplatesFiles(spec) || !ref.IsDefined() {
		return "", nil
	}
	obj, err := external.GetObjectFromContractVersionedRef(ctx, u.Reader, ref, cluster.Namespace)
	if err != nil {
		return "", fmt.Errorf("reading the version of %s %s for templated files: %w", ref.Kind, ref.Name, err)
	}
	version, _, _ := unstructured.NestedString(obj.Object, "spec", "version")
	return version, nil
}
