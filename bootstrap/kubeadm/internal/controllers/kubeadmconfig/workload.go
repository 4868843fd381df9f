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
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// After a move or a restore a Cluster, its Machines and its control plane
// come back without their status until Cluster API's controllers compute it
// again: every Machine looks unjoined, the control plane uninitialized. What
// would only be right for a new machine (reviving a join token that was
// deleted after use, rendering data that was deleted after boot, taking the
// init lock) is decided from the workload cluster instead.

// nodeListAge is how long a workload cluster's Node list answers for it: after
// a restore every Machine of a cluster asks at once.
const nodeListAge = 15 * time.Second

// nodeLists remembers, per workload cluster, the provider IDs of its Nodes.
type nodeLists struct {
	mu        sync.Mutex
	byCluster map[types.UID]nodeList
}

type nodeList struct {
	taken       time.Time
	providerIDs sets.Set[string]
}

// joinedInWorkload reports whether the owner Machine's Node exists: its
// nodeRef says so, or, while the nodeRef is missing, the workload cluster
// has a Node with the Machine's provider ID. A Machine without a provider ID
// has no Node; a pool is never joined as a whole.
func (r *Reconciler) joinedInWorkload(ctx context.Context, s *scope) (bool, outcome) {
	m := s.owner.machine
	switch {
	case m == nil:
		return false, outcome{}
	case s.owner.joined():
		return true, outcome{}
	case m.Spec.ProviderID == "":
		return false, outcome{}
	}
	ids, o := r.nodeProviderIDs(ctx, s)
	if o.stops() {
		return false, o
	}
	return ids.Has(m.Spec.ProviderID), outcome{}
}

// nodeProviderIDs lists the provider IDs of the workload cluster's Nodes, or
// answers from a list taken less than nodeListAge ago.
func (r *Reconciler) nodeProviderIDs(ctx context.Context, s *scope) (sets.Set[string], outcome) {
	now := r.clock().Now()
	r.nodes.mu.Lock()
	l, ok := r.nodes.byCluster[s.cluster.UID]
	r.nodes.mu.Unlock()
	if ok && now.Sub(l.taken) < nodeListAge {
		return l.providerIDs, outcome{}
	}
	c, err := r.ClusterCache.GetUncachedClient(ctx, util.ObjectKey(s.cluster))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		s.dataNotAvailablef(bootstrapv1.KubeadmConfigWorkloadClusterUnreachableReason, "Waiting to reach the API server of Cluster %s to see whether %s has joined", s.cluster.Name, s.owner)
		return nil, halt(ctrl.Result{RequeueAfter: unreachableRetry})
	}
	if err != nil {
		return nil, fail(err)
	}
	ids := sets.New[string]()
	list := &corev1.NodeList{}
	for opts := []client.ListOption{client.Limit(500)}; ; opts = []client.ListOption{client.Limit(500), client.Continue(list.Continue)} {
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, fail(fmt.Errorf("listing the Nodes of Cluster %s: %w", s.cluster.Name, err))
		}
		for i := range list.Items {
			if id := list.Items[i].Spec.ProviderID; id != "" {
				ids.Insert(id)
			}
		}
		if list.Continue == "" {
			break
		}
	}
	r.nodes.mu.Lock()
	if r.nodes.byCluster == nil {
		r.nodes.byCluster = map[types.UID]nodeList{}
	}
	r.nodes.byCluster[s.cluster.UID] = nodeList{taken: now, providerIDs: ids}
	r.nodes.mu.Unlock()
	return ids, outcome{}
}

// kubeadmConfigMap is what kubeadm init uploads first once the control plane
// runs: the cluster's kubeadm configuration.
var kubeadmConfigMap = client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "kubeadm-config"}

// controlPlaneRunning reports whether the workload cluster, while its Cluster
// does not say it is initialized, already runs a control plane kubeadm
// initialized. A cluster that cannot be reached runs none yet as far as
// anyone can tell: before the first init, its API server does not exist.
func (r *Reconciler) controlPlaneRunning(ctx context.Context, s *scope) (bool, error) {
	c, err := r.ClusterCache.GetUncachedClient(ctx, util.ObjectKey(s.cluster))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = c.Get(ctx, kubeadmConfigMap, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking for %s in Cluster %s: %w", kubeadmConfigMap, s.cluster.Name, err)
	}
	return true, nil
}
