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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/controllers/kubeadmconfig"
)

// TestRotationKeepsThePreviousTokenWhileInstancesJoin: a scale-up lands while
// a settled pool's token rotates (between the rotation's writes), so the new
// instance boots with the data that carries the old token. That token stays
// valid for as long as the pool has instances that have not joined, longer
// than a TTL if need be, and is let go once they have.
func TestRotationKeepsThePreviousTokenWhileInstancesJoin(t *testing.T) {
	p := newStepwise(t)
	pool, cfg := p.settledPool()
	old := p.specToken(cfg)

	scaleDuringRotation := onFirst(func(obj client.Object) bool { return obj.GetName() == cfg.Name && obj.GetNamespace() == p.ns }, func() { p.scalePool(pool, 2) })
	racing := interceptor.NewClient(withWatch(t, mgmt), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*bootstrapv1.KubeadmConfig); ok {
				scaleDuringRotation(obj)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	p.halfTTL()
	p.reconcile(p.reconciler(racing, nil), cfg)
	if p.specToken(cfg) == old {
		t.Fatal("the settled pool's token did not rotate")
	}
	oldExpires := expiration(t, mustToken(t, old.ID))

	// Each half TTL while the new instance has not joined, the old token is
	// extended, past its first expiry and on.
	r := p.reconciler(nil, nil)
	for range 3 {
		p.halfTTL()
		p.reconcile(r, cfg)
		expires := expiration(t, mustToken(t, old.ID))
		if !expires.After(oldExpires) {
			t.Fatalf("the token the booting instance holds was not extended (expires %s)", expires)
		}
		oldExpires = expires
	}
	if err := mgmt.Client.Get(p.ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := mgmt.Client.Get(p.ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Status.DataSecretName}, sec); err != nil {
		t.Fatal(err)
	}
	if sec.Annotations[bootstrapv1.PreviousBootstrapTokenIDAnnotation] != old.ID {
		t.Fatalf("the data secret does not record the previous token: %v", sec.Annotations)
	}

	// The instance joined: the old token is no longer kept; it expires.
	setPoolNodes(t, p.fixture, pool, "pool-0", "pool-1")
	p.halfTTL()
	p.reconcile(r, cfg)
	if err := mgmt.Client.Get(p.ctx, client.ObjectKeyFromObject(sec), sec); err != nil {
		t.Fatal(err)
	}
	if sec.Annotations[bootstrapv1.PreviousBootstrapTokenIDAnnotation] == old.ID {
		t.Error("the old token is still kept once every instance joined")
	}
	if got := expiration(t, mustToken(t, old.ID)); got.After(oldExpires) {
		t.Error("the previous token was extended once every instance joined")
	}
}

// TestRotationWaitsForAScaleUpItDidNotSee: the pool read at the start of a
// reconcile is settled, and a scale-up lands before the rotation begins
// (here: while the token is extended). The pool is read again before the
// rotation: it has an instance to boot, which gets the current token, so
// nothing rotates.
func TestRotationWaitsForAScaleUpItDidNotSee(t *testing.T) {
	p := newStepwise(t)
	pool, cfg := p.settledPool()
	tok := p.specToken(cfg)

	scale := onFirst(func(obj client.Object) bool { return obj.GetNamespace() == metav1.NamespaceSystem }, func() { p.scalePool(pool, 2) })
	extending := interceptor.NewClient(withWatch(t, workload), interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			scale(obj)
			return c.Update(ctx, obj, opts...)
		},
	})
	p.halfTTL()
	p.reconcile(p.reconciler(nil, extending), cfg)
	if got := p.specToken(cfg); got != tok {
		t.Fatalf("the token rotated from %s to %s while an instance was to boot with it", tok, got)
	}
	if !expiration(t, mustToken(t, tok.ID)).After(p.clock.Now().Add(kubeadmconfig.DefaultTokenTTL / 2)) {
		t.Fatal("the token was not extended")
	}
}

// TestPoolWhoseSpecCannotRenderKeepsItsToken: a settled pool's spec is
// changed to name a Secret that does not exist: its data cannot be rendered
// again. The instances it launches meanwhile boot from the data that exists,
// so the token that data carries stays valid (and does not rotate into data
// that cannot be written).
func TestPoolWhoseSpecCannotRenderKeepsItsToken(t *testing.T) {
	p := newStepwise(t)
	_, cfg := p.settledPool()
	tok := p.specToken(cfg)
	p.get(cfg)
	before := cfg.DeepCopy()
	cfg.Spec.Files = []upstreambootstrapv1.File{{Path: "/etc/app.conf",
		ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "not-yet", Key: "conf"}}}}
	if err := mgmt.Client.Patch(p.ctx, cfg, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	r := p.reconciler(nil, nil)
	for range 3 {
		p.halfTTL()
		p.reconcile(r, cfg)
		p.get(cfg)
		if c := conditions.Get(cfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition); c == nil || c.Reason != bootstrapv1.KubeadmConfigReferencedSecretNotFoundReason {
			t.Fatalf("DataSecretAvailable: %s", dataAvailableReason(cfg))
		}
		if got := p.specToken(cfg); got != tok {
			t.Fatalf("the token rotated from %s to %s though no data can carry it", tok, got)
		}
		if !expiration(t, mustToken(t, tok.ID)).After(p.clock.Now().Add(kubeadmconfig.DefaultTokenTTL / 2)) {
			t.Fatal("the token of the pool's live data was not kept valid")
		}
	}
}
