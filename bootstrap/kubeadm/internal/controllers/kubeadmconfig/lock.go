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
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// initLockCached returns the UID of the cluster's init lock in the cache
// ("?" when the cache cannot tell), or "" when there is none or it is one
// this process released already (the cache lags behind that delete).
func (r *Reconciler) initLockCached(ctx context.Context, cluster *clusterv1.Cluster) types.UID {
	cm := &corev1.ConfigMap{}
	err := r.CachingClient.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: bootstrapv1.InitLockName(cluster.Name)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return ""
	case err != nil:
		return "?"
	case r.lockReleases.released(cluster.UID, cm.UID):
		return ""
	}
	return cm.UID
}

// lockReleases lets one reconcile at a time release a cluster's init lock
// once its control plane is initialized, and remembers the locks released:
// every joining machine of a cluster finds the lock in the cache at first,
// and without this each would read it live and try to delete it (a burst of
// N joins made N reads and N deletes per cluster).
type lockReleases struct {
	mu       sync.Mutex
	inFlight map[types.UID]bool      // cluster UID
	done     map[types.UID]types.UID // cluster UID -> UID of the lock released
}

// begin reports whether the caller releases the cluster's lock (then it
// calls end); false when another reconcile is doing it.
func (l *lockReleases) begin(cluster types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight[cluster] {
		return false
	}
	if l.inFlight == nil {
		l.inFlight = map[types.UID]bool{}
	}
	l.inFlight[cluster] = true
	return true
}

func (l *lockReleases) end(cluster, lock types.UID, released bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inFlight, cluster)
	if released && lock != "?" {
		if l.done == nil {
			l.done = map[types.UID]types.UID{}
		}
		l.done[cluster] = lock
	}
}

func (l *lockReleases) released(cluster, lock types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done[cluster] == lock
}
