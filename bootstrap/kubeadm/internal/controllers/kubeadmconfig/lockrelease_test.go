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
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
)

// releaseCounter is an init lock that counts releases and blocks each until
// told, so that concurrent reconciles overlap.
type releaseCounter struct {
	releases atomic.Int32
	gate     chan struct{}
}

func (l *releaseCounter) Acquire(context.Context, *clusterv1.Cluster, *clusterv1.Machine) bool {
	return false
}

func (l *releaseCounter) Release(context.Context, *clusterv1.Cluster, *clusterv1.Machine) bool {
	l.releases.Add(1)
	<-l.gate
	return true
}

// TestInitLockReleasedOncePerCluster: when a cluster's control plane is
// initialized, every joining machine finds the init lock in the (lagging)
// cache; one of them releases it, and none tries again once it is released,
// although the cache still shows it.
func TestInitLockReleasedOncePerCluster(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "cluster-uid"}}
	cluster.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	lock := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: bootstrapv1.InitLockName("c"), Namespace: "ns", UID: "lock-uid"}}
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(lock).Build()
	locker := &releaseCounter{gate: make(chan struct{})}
	r := &Reconciler{CachingClient: cache, InitLock: locker}

	join := func() {
		s := &scope{cluster: cluster, owner: &owner{machine: &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}}}}
		if action, o := r.action(context.Background(), s); o.stops() || action != plan.ActionJoin {
			t.Errorf("action: %q, %+v", action, o)
		}
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(join)
	}
	for locker.releases.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(locker.gate)
	wg.Wait()
	join() // the cache still holds the released lock
	if n := locker.releases.Load(); n != 1 {
		t.Fatalf("the lock was released %d times; once is enough", n)
	}

	// A lock with another UID (taken again after a restore, say) is released.
	if err := cache.Delete(context.Background(), lock); err != nil {
		t.Fatal(err)
	}
	lock = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: bootstrapv1.InitLockName("c"), Namespace: "ns", UID: "other-uid"}}
	if err := cache.Create(context.Background(), lock); err != nil {
		t.Fatal(err)
	}
	join()
	if n := locker.releases.Load(); n != 2 {
		t.Fatalf("a new lock must be released: %d releases", n)
	}
}
