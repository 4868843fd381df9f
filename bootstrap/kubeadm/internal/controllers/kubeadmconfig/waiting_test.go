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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// TestWaitingForAReferencedSecretBacksOff: a config names two Secrets, one
// large and present, one missing. While it waits, the present one is never
// read in full, and it looks again ever less often, up to five minutes; the
// missing one appears and the data is written.
func TestWaitingForAReferencedSecretBacksOff(t *testing.T) {
	p := newStepwise(t)
	p.secret("large", map[string]string{"k": strings.Repeat("x", 500<<10)})
	spec := withFiles(
		upstreambootstrapv1.File{Path: "/etc/large", ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "large", Key: "k"}}},
		upstreambootstrapv1.File{Path: "/etc/later", ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "later", Key: "k"}}})
	_, cfg := p.machine("w", false, spec)
	fullReads := 0
	counting := interceptor.NewClient(withWatch(t, mgmt), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok && key.Name == "large" {
				fullReads++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := p.reconciler(counting, nil)
	start := p.clock.Now()
	for _, step := range []struct {
		wait, atLeast, atMost time.Duration
	}{{0, 20 * time.Second, 20 * time.Second}, {2 * time.Minute, 2 * time.Minute, 3 * time.Minute}, {time.Hour, 5 * time.Minute, 5 * time.Minute}} {
		p.clock.Step(step.wait)
		after := p.reconcile(r, cfg)
		// The wait is counted from the condition's time, the real time of the
		// first reconcile to the second: later than the test's clock started
		// by the time the test took to get there.
		p.get(cfg)
		late := max(0, conditions.Get(cfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition).LastTransitionTime.Sub(start))
		if after < step.atLeast-late || after > step.atMost {
			t.Errorf("after waiting %s, it looks again in %s, want %s to %s", step.wait, after, step.atLeast-late, step.atMost)
		}
	}
	if fullReads != 0 {
		t.Errorf("the present Secret was read in full %d times while the other was missing", fullReads)
	}
	p.secret("later", map[string]string{"k": "x"})
	p.reconcile(r, cfg)
	p.get(cfg)
	if !ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) {
		t.Fatalf("no data once both Secrets exist: %s", dataAvailableReason(cfg))
	}
}
