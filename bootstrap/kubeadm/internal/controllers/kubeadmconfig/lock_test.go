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

package kubeadmconfig_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

// initsAndWaits splits control-plane configs into those with data and those
// waiting for the init lock.
func initsAndWaits(f *fixture, configs []*bootstrapv1.KubeadmConfig) (created, waiting []*bootstrapv1.KubeadmConfig) {
	for _, cfg := range configs {
		if err := mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(cfg), cfg); apierrors.IsNotFound(err) {
			continue
		}
		switch {
		case ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false):
			created = append(created, cfg)
		case strings.HasPrefix(dataAvailableReason(cfg), bootstrapv1.KubeadmConfigWaitingForInitLockReason):
			waiting = append(waiting, cfg)
		}
	}
	return created, waiting
}

func lockHolder(f *fixture) (string, bool) {
	cm := &corev1.ConfigMap{}
	err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: bootstrapv1.InitLockName(f.cluster.Name)}, cm)
	if apierrors.IsNotFound(err) {
		return "", false
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return cm.Data["lock-information"], true
}

// TestInitLock creates control-plane machines all at once: exactly one
// initializes; when its machine goes away another one takes over; once the
// control plane is initialized the rest join it and the lock is gone.
func TestInitLock(t *testing.T) {
	startManager(t)
	f := newFixture(t)
	f.setClusterStatus(true, false)

	const n = 5
	configs := make([]*bootstrapv1.KubeadmConfig, n)
	machines := make([]*clusterv1.Machine, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			machines[i], configs[i] = f.machine(fmt.Sprintf("cp-%d", i), true, initSpec(bootstrapv1.CloudConfig))
		})
	}
	wg.Wait()

	var holder *bootstrapv1.KubeadmConfig
	f.waitFor("one init and the others waiting for the lock", 60*time.Second, func() bool {
		created, waiting := initsAndWaits(f, configs)
		if len(created) == 1 {
			holder = created[0]
		}
		return len(created) == 1 && len(waiting) == n-1
	})
	if info, ok := lockHolder(f); !ok || !strings.Contains(info, holder.Name) {
		t.Fatalf("the lock does not name the machine that initializes: %q", info)
	}
	time.Sleep(3 * time.Second)
	if created, _ := initsAndWaits(f, configs); len(created) != 1 {
		t.Fatalf("%d machines got init data", len(created))
	}

	// The holder's machine goes away before the control plane came up.
	for i, cfg := range configs {
		if cfg.Name == holder.Name {
			if err := mgmt.Client.Delete(f.ctx, machines[i]); err != nil {
				t.Fatal(err)
			}
			if err := mgmt.Client.Delete(f.ctx, cfg); err != nil {
				t.Fatal(err)
			}
			configs = append(configs[:i], configs[i+1:]...)
			break
		}
	}
	var next *bootstrapv1.KubeadmConfig
	f.waitFor("another machine to take the released lock", 90*time.Second, func() bool {
		created, _ := initsAndWaits(f, configs)
		if len(created) == 1 {
			next = created[0]
		}
		return len(created) == 1
	})
	if info, _ := lockHolder(f); !strings.Contains(info, next.Name) {
		t.Fatalf("the lock does not name the new holder %s: %q", next.Name, info)
	}

	// The control plane is up: the others join it and the lock is released.
	f.setClusterStatus(true, true)
	for _, cfg := range configs {
		sec := f.waitForData(cfg)
		if cfg.Name == next.Name {
			continue
		}
		_, kubeadmConfig, err := consumers.KubeadmConfigIn("cloud-config", sec.Data["value"])
		if err != nil || !strings.Contains(string(kubeadmConfig), "kind: JoinConfiguration") || !strings.Contains(string(kubeadmConfig), "controlPlane:") {
			t.Errorf("%s must join the control plane: %v\n%s", cfg.Name, err, kubeadmConfig)
		}
	}
	f.waitFor("the init lock to be released", 30*time.Second, func() bool { _, ok := lockHolder(f); return !ok })
}

// TestInitLockReleasedWhenItsHolderFails: a control-plane machine that takes
// the lock but cannot produce its init data (a file from a Secret that does
// not exist) releases it, so another control-plane machine initializes; the
// first then waits for the lock like any other.
func TestInitLockReleasedWhenItsHolderFails(t *testing.T) {
	startManager(t)
	f := newFixture(t)
	f.clusterCertificates()
	f.setClusterStatus(true, false)
	broken := initSpec(bootstrapv1.CloudConfig)
	broken.Files = []upstreambootstrapv1.File{{Path: "/etc/from-secret", ContentFrom: upstreambootstrapv1.FileSource{
		Secret: upstreambootstrapv1.SecretFileSource{Name: "not-yet", Key: "k"}}}}
	_, first := f.machine("cp-broken", true, broken)
	f.waitFor("the broken machine to be refused its data", 30*time.Second, func() bool {
		f.get(first)
		return dataAvailableReason(first) != "" && !strings.HasPrefix(dataAvailableReason(first), bootstrapv1.KubeadmConfigWaitingForInitLockReason)
	})
	f.waitFor("the lock to be released", 10*time.Second, func() bool { _, held := lockHolder(f); return !held })
	_, second := f.machine("cp-ok", true, initSpec(bootstrapv1.CloudConfig))
	f.waitForData(second)
	if info, _ := lockHolder(f); !strings.Contains(info, "cp-ok") {
		t.Fatalf("the lock does not name the machine that initializes: %q", info)
	}
	f.secret("not-yet", map[string]string{"k": "v"})
	f.waitFor("the fixed machine to wait for the lock", 30*time.Second, func() bool {
		f.get(first)
		return strings.HasPrefix(dataAvailableReason(first), bootstrapv1.KubeadmConfigWaitingForInitLockReason)
	})
}

// TestInitLockKeptOnceInitDataWasWritten: the initializing machine's data
// secret is deleted before its Node registers and rendering it again fails
// (its spec now names a Secret that does not exist). That machine may be
// running kubeadm init: the lock stays its own, and another control-plane
// machine waits instead of initializing a second etcd.
func TestInitLockKeptOnceInitDataWasWritten(t *testing.T) {
	startManager(t)
	f := newFixture(t)
	f.clusterCertificates()
	f.setClusterStatus(true, false)
	_, first := f.machine("cp-0", true, initSpec(bootstrapv1.CloudConfig))
	data := f.waitForData(first)

	f.get(first)
	before := first.DeepCopy()
	first.Spec.Files = []upstreambootstrapv1.File{{Path: "/etc/from-secret", ContentFrom: upstreambootstrapv1.FileSource{
		Secret: upstreambootstrapv1.SecretFileSource{Name: "not-there", Key: "k"}}}}
	if err := mgmt.Client.Patch(f.ctx, first, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Delete(f.ctx, data); err != nil {
		t.Fatal(err)
	}
	f.waitFor("rendering the init data again to fail", 30*time.Second, func() bool {
		f.get(first)
		return strings.HasPrefix(dataAvailableReason(first), bootstrapv1.KubeadmConfigReferencedSecretNotFoundReason)
	})
	_, second := f.machine("cp-1", true, initSpec(bootstrapv1.CloudConfig))
	f.waitFor("the second machine to wait for the lock", 30*time.Second, func() bool {
		f.get(second)
		return strings.HasPrefix(dataAvailableReason(second), bootstrapv1.KubeadmConfigWaitingForInitLockReason)
	})
	time.Sleep(2 * time.Second)
	if info, held := lockHolder(f); !held || !strings.Contains(info, "cp-0") {
		t.Fatalf("the lock is %q (held: %v), want cp-0's", info, held)
	}
	f.get(second)
	if ptr.Deref(second.Status.Initialization.DataSecretCreated, false) {
		t.Fatal("a second control-plane machine got init data")
	}
}
