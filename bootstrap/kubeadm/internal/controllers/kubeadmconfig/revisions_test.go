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
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// revisionOf matches the data secret names of the pool config named cfg.
func revisionOf(cfg string) *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(cfg) + "-[0-9a-f]{10}$")
}

// waitForRevision waits until cfg's status names a data secret other than
// previous, of the current generation, and returns it.
func (f *fixture) waitForRevision(cfg *bootstrapv1.KubeadmConfig, previous string) *corev1.Secret {
	f.t.Helper()
	f.waitFor("the pool's data in a new revision, and the status", 10*time.Second, func() bool {
		f.get(cfg)
		return cfg.Status.DataSecretName != previous && cfg.Status.ObservedGeneration == cfg.Generation
	})
	sec := &corev1.Secret{}
	if err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: cfg.Status.DataSecretName}, sec); err != nil {
		f.t.Fatalf("status names data secret %q, which cannot be read: %v", cfg.Status.DataSecretName, err)
	}
	return sec
}

// patchFormat changes cfg's format, as a topology change patches a pool's config.
func (f *fixture) patchFormat(cfg *bootstrapv1.KubeadmConfig, format bootstrapv1.Format) {
	f.t.Helper()
	before := cfg.DeepCopy()
	cfg.Spec.Format = format
	if err := mgmt.Client.Patch(f.ctx, cfg, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

// exists reports whether the Secret called name is on the API server.
func (f *fixture) exists(name string) bool {
	f.t.Helper()
	err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &corev1.Secret{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return err == nil
}

// TestPoolSpecChangeIsANewRevision: a change to a MachinePool's KubeadmConfig
// (as a ClusterClass topology change patches it in place) reaches the pool
// at once under a new data secret name, the infrastructure's signal to
// roll, with the same token; the earlier revision stays until the pool
// points at the new one and every instance is a Node; a change of what is
// not the data (labels) writes nothing.
func TestPoolSpecChangeIsANewRevision(t *testing.T) {
	startManager(t)
	f := newRunningCluster(t)
	pool := f.machinePool("pool", 2)
	cfg := f.config("pool", pool, joinSpec(bootstrapv1.Ignition, false))
	first := f.waitForData(cfg)
	if !revisionOf(cfg.Name).MatchString(first.Name) {
		t.Fatalf("the pool's data secret is %s; want %s-<digest>", first.Name, cfg.Name)
	}
	id := first.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]

	f.patchFormat(cfg, bootstrapv1.CloudConfig)
	second := f.waitForRevision(cfg, first.Name)
	checkDataSecret(t, cfg, f.cluster.Name, second, bootstrapv1.CloudConfig)
	if got := second.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]; got != id {
		t.Errorf("the new revision carries token %s, not the pool's %s", got, id)
	}
	if _, ok := tokenSecret(t, id); !ok {
		t.Error("the pool's token is gone from the workload cluster")
	}
	if got, want := second.Annotations[bootstrapv1.ConfigGenerationAnnotation], strconv.FormatInt(cfg.Generation, 10); got != want {
		t.Errorf("data secret rendered from generation %q, want %q", got, want)
	}
	if got := second.Annotations[bootstrapv1.PreviousDataSecretAnnotation]; got != first.Name {
		t.Errorf("the new revision names %q as its previous one, want %s", got, first.Name)
	}
	f.waitFor("a BootstrapDataUpdated event", 10*time.Second, func() bool { return hasEvent(t, cfg, bootstrapv1.BootstrapDataUpdatedEvent) })

	// A label change wakes the config without changing its spec: the data
	// stays as it is.
	version := second.ResourceVersion
	before := cfg.DeepCopy()
	cfg.Labels["touched"] = "yes"
	if err := mgmt.Client.Patch(f.ctx, cfg, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if f.get(second); second.ResourceVersion != version || cfg.Status.DataSecretName != second.Name {
		t.Error("the data secret was written again without a spec change")
	}

	// Cluster API points the pool at the new revision; its instances still
	// roll (no Nodes yet), so the earlier revision stays.
	before2 := pool.DeepCopy()
	pool.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(second.Name)
	if err := mgmt.Client.Patch(f.ctx, pool, client.MergeFrom(before2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if !f.exists(first.Name) {
		t.Fatal("the earlier revision was deleted while the pool's instances were not all Nodes")
	}
	before2 = pool.DeepCopy()
	pool.Status.NodeRefs = []corev1.ObjectReference{{Kind: "Node", Name: "pool-a"}, {Kind: "Node", Name: "pool-b"}}
	if err := mgmt.Client.Status().Patch(f.ctx, pool, client.MergeFrom(before2)); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the earlier revision to be deleted", 10*time.Second, func() bool { return !f.exists(first.Name) })
	f.waitFor("the current revision to name no previous one", 10*time.Second, func() bool {
		f.get(second)
		_, ok := second.Annotations[bootstrapv1.PreviousDataSecretAnnotation]
		return !ok
	})

	// Back to the first spec: the first revision's name again, written anew.
	f.patchFormat(cfg, bootstrapv1.Ignition)
	if third := f.waitForRevision(cfg, second.Name); third.Name != first.Name {
		t.Errorf("the first spec again is revision %s; want %s, its name before", third.Name, first.Name)
	}
}

// TestPoolRevisionKeptAcrossARestore: a pool's config re-created with a new
// UID and no status finds its revision through the MachinePool and keeps
// its name, whether the revision lost its owner references (a restore) or
// names the new UID already (clusterctl move rewrites them): the new
// config's generation counts from one again, which is no spec change, so
// nothing is rendered again and the pool does not roll.
func TestPoolRevisionKeptAcrossARestore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners func(restored *bootstrapv1.KubeadmConfig) []metav1.OwnerReference
	}{
		{"restore without owner references", func(*bootstrapv1.KubeadmConfig) []metav1.OwnerReference { return nil }},
		{"clusterctl move", func(restored *bootstrapv1.KubeadmConfig) []metav1.OwnerReference {
			return []metav1.OwnerReference{*metav1.NewControllerRef(restored, bootstrapv1.GroupVersion.WithKind("KubeadmConfig"))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := startManager(t)
			f := newRunningCluster(t)
			pool := f.machinePool("pool", 1)
			cfg := f.config("pool", pool, joinSpec(bootstrapv1.CloudConfig, false))
			sec := f.waitForData(cfg)
			stop()
			stopWebhooks := mgmt.StartWebhooks(t, allGates(t))

			before := pool.DeepCopy()
			pool.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(sec.Name)
			if err := mgmt.Client.Patch(f.ctx, pool, client.MergeFrom(before)); err != nil {
				t.Fatal(err)
			}
			restored := &bootstrapv1.KubeadmConfig{
				ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace, Labels: cfg.Labels, OwnerReferences: cfg.OwnerReferences},
				Spec:       cfg.Spec,
			}
			if err := mgmt.Client.Delete(f.ctx, cfg); err != nil {
				t.Fatal(err)
			}
			f.waitFor("the old config to be gone", 10*time.Second, func() bool { return mgmt.Client.Create(f.ctx, restored) == nil })
			if restored.Generation == cfg.Generation {
				t.Fatalf("the re-created config has generation %d as before: nothing to prove", cfg.Generation)
			}
			moved := sec.DeepCopy()
			moved.OwnerReferences = tc.owners(restored)
			if err := mgmt.Client.Patch(f.ctx, moved, client.MergeFrom(sec)); err != nil {
				t.Fatal(err)
			}
			stopWebhooks()

			startManager(t)
			f.waitFor("the revision to be controlled by the restored config", 10*time.Second, func() bool {
				f.get(sec)
				c := metav1.GetControllerOf(sec)
				return c != nil && c.UID == restored.UID
			})
			f.waitFor("the restored config's status", 10*time.Second, func() bool {
				f.get(restored)
				return ptr.Deref(restored.Status.Initialization.DataSecretCreated, false)
			})
			if restored.Status.DataSecretName != sec.Name {
				t.Errorf("the restored config names %s; want its revision %s", restored.Status.DataSecretName, sec.Name)
			}
			time.Sleep(3 * time.Second)
			if f.get(sec); sec.Annotations[bootstrapv1.ConfigGenerationAnnotation] != strconv.FormatInt(restored.Generation, 10) ||
				sec.Annotations[bootstrapv1.ConfigUIDAnnotation] != string(restored.UID) {
				t.Errorf("the data secret counts generation %s of %s; the restored config is at %d, %s", sec.Annotations[bootstrapv1.ConfigGenerationAnnotation],
					sec.Annotations[bootstrapv1.ConfigUIDAnnotation], restored.Generation, restored.UID)
			}
			if hasEvent(t, restored, bootstrapv1.BootstrapDataUpdatedEvent) {
				t.Error("the pool's data was rendered again, as if its spec had changed")
			}
		})
	}
}

// TestPoolRevisionNameTakenByAnotherConfig: a Machine's config named like a
// pool's revision cannot take the pool's data secret, and a pool whose next
// revision's name a Machine's config already uses does not overwrite it;
// each says why in its condition.
func TestPoolRevisionNameTakenByAnotherConfig(t *testing.T) {
	startManager(t)
	f := newRunningCluster(t)
	pool := f.machinePool("pool", 1)
	cfg := f.config("pool", pool, joinSpec(bootstrapv1.CloudConfig, false))
	sec := f.waitForData(cfg)
	value := string(sec.Data["value"])

	_, squatter := f.machine(sec.Name, false, joinSpec(bootstrapv1.Ignition, false))
	f.waitForReason(squatter, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition, bootstrapv1.KubeadmConfigDataSecretConflictReason)
	if f.get(sec); string(sec.Data["value"]) != value || metav1.GetControllerOf(sec).Name != cfg.Name {
		t.Fatal("a Machine's config named like the pool's revision overwrote it")
	}

	// The other way round: the pool's next revision is a name a Machine's
	// config already holds.
	other := f.machinePool("other", 1)
	otherCfg := f.config("other", other, joinSpec(bootstrapv1.CloudConfig, false))
	otherSec := f.waitForData(otherCfg)
	f.patchFormat(otherCfg, bootstrapv1.Ignition)
	next := f.waitForRevision(otherCfg, otherSec.Name)
	// Put the pool back, and let a Machine's config hold the name it would
	// move to, before the pool changes again.
	f.patchFormat(otherCfg, bootstrapv1.CloudConfig)
	if back := f.waitForRevision(otherCfg, next.Name); back.Name != otherSec.Name {
		t.Fatalf("the pool's first spec again is %s; want %s", back.Name, otherSec.Name)
	}
	if err := mgmt.Client.Delete(f.ctx, next); err != nil {
		t.Fatal(err)
	}
	_, holder := f.machine(next.Name, false, joinSpec(bootstrapv1.CloudConfig, false))
	held := f.waitForData(holder)
	f.patchFormat(otherCfg, bootstrapv1.Ignition)
	f.waitForReason(otherCfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition, bootstrapv1.KubeadmConfigDataSecretConflictReason)
	if f.get(held); string(held.Data["format"]) != string(bootstrapv1.CloudConfig) || metav1.GetControllerOf(held).Name != holder.Name {
		t.Fatal("the pool's new revision overwrote a Machine's data secret")
	}
}
