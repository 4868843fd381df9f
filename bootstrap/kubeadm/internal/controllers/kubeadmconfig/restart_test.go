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
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/featuregate"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"sigs.k8s.io/cluster-api/controllers/clustercache"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/controllers/kubeadmconfig"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/initlock"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

func allGates(t testing.TB) featuregate.FeatureGate {
	t.Helper()
	g := feature.NewFeatureGates()
	if err := g.SetFromMap(map[string]bool{string(feature.KubeadmBootstrapFormatIgnition): true, string(feature.KubeadmBootstrapFormatRaw): true}); err != nil {
		t.Fatal(err)
	}
	return g
}

// direct is a reconciler called by hand, without a manager: for tests that
// need a failure at an exact point. It reads and writes the real API servers.
func direct(c client.Client, cc clustercache.ClusterCache, gates featuregate.FeatureGate) (*kubeadmconfig.Reconciler, *events.FakeRecorder) {
	rec := events.NewFakeRecorder(100)
	return &kubeadmconfig.Reconciler{
		Client: c, CachingClient: c, APIReader: c, ClusterCache: cc, Gates: gates, Recorder: rec,
		TokenTTL: kubeadmconfig.DefaultTokenTTL, InitLock: initlock.Lock{Reader: c, Writer: c},
	}, rec
}

func reconcile(t *testing.T, r *kubeadmconfig.Reconciler, cfg *bootstrapv1.KubeadmConfig) (ctrl.Result, error) {
	t.Helper()
	return r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cfg)})
}

// checkOneSecretOneToken checks a config at rest: status names its data
// secret, the secret is its own, and the workload cluster holds exactly the
// one token the secret records.
func checkOneSecretOneToken(t *testing.T, f *fixture, cfg *bootstrapv1.KubeadmConfig) *corev1.Secret {
	t.Helper()
	f.get(cfg)
	if !ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) || cfg.Status.DataSecretName != cfg.Name {
		t.Fatalf("%s: status %+v (%s)", cfg.Name, cfg.Status.Initialization, dataAvailableReason(cfg))
	}
	sec := &corev1.Secret{}
	if err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: cfg.Status.DataSecretName}, sec); err != nil {
		t.Fatalf("%s: status points at a data secret that cannot be read: %v", cfg.Name, err)
	}
	if c := metav1.GetControllerOf(sec); c == nil || c.UID != cfg.UID {
		t.Errorf("%s: data secret owners %v", cfg.Name, sec.OwnerReferences)
	}
	tokens := tokensOf(t, cfg)
	if len(tokens) != 1 {
		t.Fatalf("%s: %d bootstrap tokens, want exactly 1", cfg.Name, len(tokens))
	}
	if id := string(tokens[0].Data["token-id"]); sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation] != id {
		t.Errorf("%s: data secret records token %q, the workload cluster has %q", cfg.Name, sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation], id)
	}
	return sec
}

// TestInterruptedReconcile stops a reconcile right after the token is
// created, then right after the data secret is written: a fresh controller
// (nothing in memory) finishes with one token and one data secret, and keeps
// the secret that was already written.
func TestInterruptedReconcile(t *testing.T) {
	gates := allGates(t)
	mgmt.StartWebhooks(t, gates)
	f := newRunningCluster(t)
	_, cfg := f.machine("worker", false, joinSpec(bootstrapv1.CloudConfig, false))
	cc := clustercache.NewFakeClusterCache(workload.Client, client.ObjectKeyFromObject(f.cluster))
	lost := errors.New("connection lost")
	live, err := client.NewWithWatch(mgmt.Config, client.Options{Scheme: mgmt.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	dataSecretCreateFails := interceptor.NewClient(live, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Secret); ok && obj.GetName() == cfg.Name {
				return lost
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	r, _ := direct(dataSecretCreateFails, cc, gates)
	if _, err := reconcile(t, r, cfg); err == nil {
		t.Fatal("the interrupted reconcile reported success")
	}
	if n := len(tokensOf(t, cfg)); n != 1 {
		t.Fatalf("%d tokens after the first attempt", n)
	}

	statusPatchFails := interceptor.NewClient(live, interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return lost
		},
	})
	r, _ = direct(statusPatchFails, cc, gates)
	if _, err := reconcile(t, r, cfg); err == nil {
		t.Fatal("the interrupted reconcile reported success")
	}
	written := &corev1.Secret{}
	if err := mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(cfg), written); err != nil {
		t.Fatalf("the second attempt wrote no data secret: %v", err)
	}
	if n := len(tokensOf(t, cfg)); n != 1 {
		t.Fatalf("%d tokens after the second attempt: the retry must find the first token", n)
	}

	// A fresh controller: right after the write it waits for its cache to
	// catch up; once the secret is clearly older than that, it records it.
	r, _ = direct(mgmt.Client, cc, gates)
	if res, err := reconcile(t, r, cfg); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("a secret written a moment ago must be waited for: %v %v", res, err)
	}
	f.get(cfg)
	if ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) {
		t.Fatal("the status was written while the cache could still be behind")
	}
	r.Clock = clocktesting.NewFakePassiveClock(time.Now().Add(time.Minute))
	if _, err := reconcile(t, r, cfg); err != nil {
		t.Fatal(err)
	}
	sec := checkOneSecretOneToken(t, f, cfg)
	if sec.ResourceVersion != written.ResourceVersion {
		t.Error("the data secret written before the interruption was rewritten instead of recorded")
	}
}

// TestRestartMidReconcile stops a manager while it is reconciling many
// configs and starts a new one: every config ends with exactly one data
// secret, a consistent status and one token; no secret is left without status.
func TestRestartMidReconcile(t *testing.T) {
	// The first manager is throttled, so that it is stopped in the middle of
	// its work, with reconciles in flight.
	stopFirst := startManager(t, "--kube-api-qps=8", "--kube-api-burst=8")
	f := newRunningCluster(t)

	const n = 30
	configs := make([]*bootstrapv1.KubeadmConfig, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, configs[i] = f.machine(fmt.Sprintf("worker-%02d", i), false, joinSpec(bootstrapv1.Raw, false))
		})
	}
	wg.Wait()
	done := func() int {
		count := 0
		for _, cfg := range configs {
			c := &bootstrapv1.KubeadmConfig{}
			if err := mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(cfg), c); err == nil && ptr.Deref(c.Status.Initialization.DataSecretCreated, false) {
				count++
			}
		}
		return count
	}
	f.waitFor("the first manager to get going", 60*time.Second, func() bool { return done() > 0 })
	stopFirst()
	stoppedAt := done()
	t.Logf("%d of %d configs had their data when the first manager stopped", stoppedAt, n)
	if stoppedAt == n {
		t.Fatal("the first manager finished before it was stopped: the test proves nothing")
	}

	startManager(t)
	f.waitFor("every config's data", 120*time.Second, func() bool { return done() == n })
	for _, cfg := range configs {
		checkOneSecretOneToken(t, f, cfg)
	}
	secrets := &corev1.SecretList{}
	if err := mgmt.Client.List(f.ctx, secrets, client.InNamespace(f.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: f.cluster.Name}); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		c := metav1.GetControllerOf(&s)
		if c == nil || c.Kind != "KubeadmConfig" {
			continue // certificates, kubeconfig
		}
		cfg := &bootstrapv1.KubeadmConfig{}
		if err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: c.Name}, cfg); err != nil || cfg.Status.DataSecretName != s.Name {
			t.Errorf("data secret %s is not recorded by its KubeadmConfig (%v)", s.Name, err)
		}
	}
}
