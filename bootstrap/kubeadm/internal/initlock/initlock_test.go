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

package initlock_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/locking"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/initlock"
)

func setup(t *testing.T) (client.Client, *clusterv1.Cluster, func(name string) *clusterv1.Machine) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := clusterv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "cluster-uid"}}
	machine := func(name string) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if err := c.Create(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	return c, cluster, machine
}

func holder(t *testing.T, c client.Client) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: bootstrapv1.InitLockName("c")}, cm); err != nil {
		return ""
	}
	return cm.Data["lock-information"]
}

// TestOneHolderReleasedOnlyByItself: one machine holds the lock; another
// waits while the holder exists and takes it once the holder is gone; a
// machine's release never frees a lock another machine holds.
func TestOneHolderReleasedOnlyByItself(t *testing.T) {
	ctx := context.Background()
	c, cluster, machine := setup(t)
	l := initlock.Lock{Reader: c, Writer: c}
	a, b := machine("a"), machine("b")
	took, holds := l.Acquire(ctx, cluster, a), l.Acquire(ctx, cluster, a)
	if !took || !holds {
		t.Fatal("a must take the free lock, and hold it when it asks again")
	}
	if l.Acquire(ctx, cluster, b) {
		t.Fatal("b took the lock a holds")
	}
	if !l.Release(ctx, cluster, b) || !strings.Contains(holder(t, c), `"a"`) {
		t.Fatalf("b's release freed a's lock: %q", holder(t, c))
	}
	if err := c.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if !l.Acquire(ctx, cluster, b) || !strings.Contains(holder(t, c), `"b"`) {
		t.Fatalf("b must take the lock of a machine that is gone: %q", holder(t, c))
	}
	if !l.Release(ctx, cluster, nil) || holder(t, c) != "" {
		t.Fatal("the release after initialization must free the lock")
	}
}

// TestUpstreamsLockIsHonoured: a lock upstream's provider took (its own
// implementation, same ConfigMap) holds here, and the reverse.
func TestUpstreamsLockIsHonoured(t *testing.T) {
	ctx := context.Background()
	c, cluster, machine := setup(t)
	ours := initlock.Lock{Reader: c, Writer: c}
	upstream := locking.NewControlPlaneInitMutex(c)
	a, b := machine("a"), machine("b")
	if !upstream.Lock(ctx, cluster, a) {
		t.Fatal("upstream's lock")
	}
	if ours.Acquire(ctx, cluster, b) || !ours.Acquire(ctx, cluster, a) {
		t.Fatal("upstream's lock for a must hold here: a holds it, b waits")
	}
	if !ours.Release(ctx, cluster, a) || !ours.Acquire(ctx, cluster, b) {
		t.Fatal("a's release, then b's lock")
	}
	if upstream.Lock(ctx, cluster, a) {
		t.Fatal("upstream's provider must see b's lock taken here")
	}
}
