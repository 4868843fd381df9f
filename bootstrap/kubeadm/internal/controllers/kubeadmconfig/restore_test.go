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
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// TestRestoredWithNewUIDs: clusterctl move and backup restores re-create a
// KubeadmConfig with a new UID and without its status, while its Machine
// already points at the data secret. The data secret gets the new config as
// its controller (garbage collection would delete it as an orphan of the old
// UID), the status is filled in, and the machine's token, the same one, is
// still kept valid: no ownership error, no new token.
func TestRestoredWithNewUIDs(t *testing.T) {
	const ttl = 20 * time.Second
	stop := startManager(t, "--bootstrap-token-ttl="+ttl.String())
	f := newRunningCluster(t)
	machine, cfg := f.machine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
	sec := f.waitForData(cfg)
	tok := f.specToken(cfg)
	s, _ := tokenSecret(t, tok.ID)
	expires := expiration(t, s)
	stop()
	stopWebhooks := mgmt.StartWebhooks(t, allGates(t)) // admission while no manager runs

	// The restore: the Machine already names its data secret; the config
	// comes back with its spec (and token), a new UID and no status.
	before := machine.DeepCopy()
	machine.Spec.Bootstrap.DataSecretName = ptr.To(sec.Name)
	if err := mgmt.Client.Patch(f.ctx, machine, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	oldUID := cfg.UID
	if err := mgmt.Client.Delete(f.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	restored := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace, Labels: cfg.Labels, OwnerReferences: cfg.OwnerReferences},
		Spec:       cfg.Spec,
	}
	var createErr error
	f.waitFor("the old config to be gone", 10*time.Second, func() bool {
		createErr = mgmt.Client.Create(f.ctx, restored)
		return createErr == nil
	})
	if restored.UID == oldUID {
		t.Fatal("the restored config kept its UID")
	}

	stopWebhooks()
	startManager(t, "--bootstrap-token-ttl="+ttl.String())
	f.waitFor("the data secret to be controlled by the restored config", 10*time.Second, func() bool {
		f.get(sec)
		c := metav1.GetControllerOf(sec)
		return c != nil && c.UID == restored.UID
	})
	f.waitFor("the restored config's status", 10*time.Second, func() bool {
		f.get(restored)
		return ptr.Deref(restored.Status.Initialization.DataSecretCreated, false) && restored.Status.DataSecretName == sec.Name
	})
	f.waitForExtension("the manager", tok.ID, expires, 2*ttl)
	if got := f.specToken(restored); got != tok {
		t.Fatalf("the token changed from %s to %s", tok, got)
	}
	if n := len(tokensOf(t, restored)); n != 0 {
		t.Fatalf("%d tokens made for the restored config, which has its own", n)
	}
}

// TestDataSecretOwnerFollowsTheAPIVersion: an owner reference that names
// the KubeadmConfig by an older API version (as Cluster API's e2e framework
// writes them, to see them updated) is rewritten to the served version, as
// upstream's provider does.
func TestDataSecretOwnerFollowsTheAPIVersion(t *testing.T) {
	startManager(t)
	f := newRunningCluster(t)
	machine, cfg := f.machine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
	sec := f.waitForData(cfg)

	before := sec.DeepCopy()
	for i := range sec.OwnerReferences {
		sec.OwnerReferences[i].APIVersion = "bootstrap.cluster.x-k8s.io/v1alpha1"
	}
	if err := mgmt.Client.Patch(f.ctx, sec, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	// The framework rewrites every object's references, the config's to its
	// Machine too: that is the event the controller sees.
	f.get(cfg)
	beforeCfg := cfg.DeepCopy()
	for i := range cfg.OwnerReferences {
		if cfg.OwnerReferences[i].UID == machine.UID {
			cfg.OwnerReferences[i].APIVersion = "cluster.x-k8s.io/v1beta1"
		}
	}
	if err := mgmt.Client.Patch(f.ctx, cfg, client.MergeFrom(beforeCfg)); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the data secret's controller reference at "+bootstrapv1.GroupVersion.String(), 20*time.Second, func() bool {
		f.get(sec)
		c := metav1.GetControllerOf(sec)
		return c != nil && c.UID == cfg.UID && c.APIVersion == bootstrapv1.GroupVersion.String() && len(sec.OwnerReferences) == 1
	})
}

// TestTokenOfAMachineGoingAway: a Machine being deleted before it joined
// will never use its token: it is deleted, not kept alive.
func TestTokenOfAMachineGoingAway(t *testing.T) {
	startManager(t)
	f := newRunningCluster(t)
	machine, cfg := f.machine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
	f.waitForData(cfg)
	tok := f.specToken(cfg)
	// Cluster API's Machine controller holds deletion with its finalizer
	// while it drains and deletes the infrastructure.
	before := machine.DeepCopy()
	machine.Finalizers = []string{"machine.cluster.x-k8s.io"}
	if err := mgmt.Client.Patch(f.ctx, machine, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Delete(f.ctx, machine); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the token of the deleted machine to be deleted", 10*time.Second, func() bool { _, ok := tokenSecret(t, tok.ID); return !ok })
	f.get(machine)
	machine.Finalizers = nil
	if err := mgmt.Client.Update(f.ctx, machine); err != nil {
		t.Fatal(err)
	}
}

// TestOwnTokenKnownAfterANewUID: a Machine's config got its token in its
// spec, but no data (the reconcile was interrupted); then a move gave the
// config a new UID, and the token expired meanwhile. The controller knows
// the token as its own, by the hash it recorded, and gives the machine a
// usable one, not data with a token nobody can join with.
func TestOwnTokenKnownAfterANewUID(t *testing.T) {
	p := newStepwise(t)
	_, cfg := p.machine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
	noData := interceptor.NewClient(withWatch(t, mgmt), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Secret); ok && obj.GetName() == cfg.Name {
				return errors.New("connection lost")
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	if _, err := reconcile(t, p.reconciler(noData, nil), cfg); err == nil {
		t.Fatal("the interrupted reconcile reported success")
	}
	lost := p.specToken(cfg)
	if err := workload.Client.Delete(p.ctx, mustToken(t, lost.ID)); err != nil {
		t.Fatal(err)
	}

	moved := p.recreate(cfg)
	p.reconcile(p.reconciler(nil, nil), moved)
	got := p.specToken(moved)
	if got == lost {
		t.Fatalf("the data carries %s, which the workload cluster no longer has", lost)
	}
	if _, ok := tokenSecret(t, got.ID); !ok {
		t.Fatalf("the data carries %s, which the workload cluster does not have", got)
	}
}

// joinedMachine is a Machine with a provider ID whose Node exists in the
// workload cluster and which names its data secret, and its config, whose
// token was deleted once the Machine's nodeRef said it joined.
func (p *stepwise) joinedMachine(name string, controlPlane bool, spec bootstrapv1.KubeadmConfigSpec) (*clusterv1.Machine, *bootstrapv1.KubeadmConfig) {
	p.t.Helper()
	m := p.newMachine(name, controlPlane)
	m.Spec.ProviderID = "test://" + p.ns + "/" + name
	p.create(m)
	cfg := p.config(name, m, spec)
	r := p.reconciler(nil, nil)
	p.reconcile(r, cfg)
	// Cluster API's Machine controller copies the data secret's name.
	p.get(m)
	before := m.DeepCopy()
	m.Spec.Bootstrap.DataSecretName = ptr.To(cfg.Name)
	if err := mgmt.Client.Patch(p.ctx, m, client.MergeFrom(before)); err != nil {
		p.t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.ns + "-" + name}, Spec: corev1.NodeSpec{ProviderID: m.Spec.ProviderID}}
	if err := workload.Client.Create(p.ctx, node); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = workload.Client.Delete(context.Background(), node) })
	p.setNodeRef(m, node.Name)
	p.reconcile(r, cfg)
	return m, cfg
}

// TestUsedTokenNotRevivedAfterARestore: a worker joined and its token was
// deleted; a restore brings its Machine back without a nodeRef and its
// config with a new UID. The workload cluster has its Node: the used token
// stays deleted.
func TestUsedTokenNotRevivedAfterARestore(t *testing.T) {
	p := newStepwise(t)
	m, cfg := p.joinedMachine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
	tok := p.specToken(cfg)
	if _, ok := tokenSecret(t, tok.ID); ok {
		t.Fatal("the token was not deleted once the Machine joined")
	}
	p.setNodeRef(m, "")
	restored := p.recreate(cfg)
	r := p.reconciler(nil, nil)
	for range 2 {
		p.halfTTL()
		p.reconcile(r, restored)
	}
	if _, ok := tokenSecret(t, tok.ID); ok {
		t.Fatal("the used join token was made again after the restore")
	}
}

// TestDeletedInitDataNotRenderedAgainAfterARestore: the first control-plane
// Machine ran kubeadm init; its data secret was deleted after boot (as
// operators do). A restore brings back its Machine without a nodeRef and the
// Cluster without its status. Its Node exists in the workload cluster: no
// init data is written again and no init lock taken.
func TestDeletedInitDataNotRenderedAgainAfterARestore(t *testing.T) {
	p := newStepwise(t)
	p.setClusterStatus(true, false)
	m, cfg := p.joinedMachine("cp-0", true, initSpec(bootstrapv1.CloudConfig))
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Namespace: p.ns}}
	p.get(sec)
	if !strings.Contains(string(sec.Data["value"]), "InitConfiguration") {
		t.Fatal("the first control-plane machine got no init data")
	}
	// Initialized: the lock is released (the next config to render does
	// it), and the data secret deleted after boot.
	p.setClusterStatus(true, true)
	lock := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: bootstrapv1.InitLockName(p.cluster.Name)}}
	if err := mgmt.Client.Delete(p.ctx, lock); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Delete(p.ctx, sec); err != nil {
		t.Fatal(err)
	}

	p.setNodeRef(m, "")
	p.setClusterStatus(true, false)
	r := p.reconciler(nil, nil)
	p.reconcile(r, cfg)
	p.reconcile(r, cfg)
	if err := mgmt.Client.Get(p.ctx, client.ObjectKeyFromObject(sec), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the init data was written again for a control plane that runs: %v", err)
	}
	if err := mgmt.Client.Get(p.ctx, client.ObjectKeyFromObject(lock), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the init lock was taken for a control plane that runs: %v", err)
	}
}

// TestNoInitWhileTheWorkloadRunsAControlPlane: a Cluster without its status
// (moved or restored) does not say its control plane is initialized, but
// its API server has kubeadm's configuration. A new control-plane Machine's
// config waits, saying why, instead of initializing a second control plane.
func TestNoInitWhileTheWorkloadRunsAControlPlane(t *testing.T) {
	p := newStepwise(t)
	p.setClusterStatus(true, false)
	running := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: metav1.NamespaceSystem}}
	if err := workload.Client.Create(p.ctx, running); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = workload.Client.Delete(context.Background(), running) })
	_, cfg := p.machine("cp-1", true, initSpec(bootstrapv1.CloudConfig))
	p.reconcile(p.reconciler(nil, nil), cfg)
	p.get(cfg)
	c := conditions.Get(cfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition)
	if c == nil || c.Reason != bootstrapv1.KubeadmConfigWaitingForControlPlaneInitReason || !strings.Contains(c.Message, "already runs a control plane") {
		t.Fatalf("DataSecretAvailable: %+v", c)
	}
	if err := mgmt.Client.Get(p.ctx, client.ObjectKey{Namespace: p.ns, Name: bootstrapv1.InitLockName(p.cluster.Name)}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the init lock was taken: %v", err)
	}
}
