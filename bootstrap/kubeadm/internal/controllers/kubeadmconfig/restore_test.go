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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
