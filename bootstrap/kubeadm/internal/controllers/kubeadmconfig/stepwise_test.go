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
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/controllers/kubeadmconfig"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// stepwise is one test's running cluster, its configs reconciled by hand on
// a fake clock, so that each step of a token's life happens exactly when the
// test says, and a failure can be put between two writes.
type stepwise struct {
	*fixture
	t     *testing.T
	clock *clocktesting.FakeClock
	cc    clustercache.ClusterCache
}

func newStepwise(t *testing.T) *stepwise {
	mgmt.StartWebhooks(t, allGates(t))
	f := newRunningCluster(t)
	return &stepwise{fixture: f, t: t, clock: clocktesting.NewFakeClock(time.Now()),
		cc: clustercache.NewFakeClusterCache(workload.Client, client.ObjectKeyFromObject(f.cluster))}
}

// reconciler reads and writes through c (the management API server when
// nil) and reaches the workload cluster through workloadClient (directly
// when nil), on the test's clock.
func (p *stepwise) reconciler(c client.Client, workloadClient client.Client) *kubeadmconfig.Reconciler {
	if c == nil {
		c = mgmt.Client
	}
	cc := p.cc
	if workloadClient != nil {
		cc = clustercache.NewFakeClusterCache(workloadClient, client.ObjectKeyFromObject(p.cluster))
	}
	r, _ := direct(c, cc, allGates(p.t))
	r.Clock = p.clock
	return r
}

// halfTTL moves the clock past the point where a token is extended.
func (p *stepwise) halfTTL() {
	p.clock.Step(kubeadmconfig.DefaultTokenTTL/2 + time.Second)
}

// reconcile reconciles cfg once, which must not fail, and says when r wants
// to look again.
func (p *stepwise) reconcile(r *kubeadmconfig.Reconciler, cfg *bootstrapv1.KubeadmConfig) time.Duration {
	p.t.Helper()
	res, err := reconcile(p.t, r, cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	return res.RequeueAfter
}

// withWatch is a live client of env, as interceptors take them.
func withWatch(t *testing.T, env *testenv.Environment) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// onFirst runs do once, the first time when says so.
func onFirst(when func(client.Object) bool, do func()) func(client.Object) {
	var once sync.Once
	return func(obj client.Object) {
		if when(obj) {
			once.Do(do)
		}
	}
}

func (p *stepwise) scalePool(pool *clusterv1.MachinePool, replicas int32) {
	p.t.Helper()
	live := &clusterv1.MachinePool{}
	if err := mgmt.Client.Get(p.ctx, client.ObjectKeyFromObject(pool), live); err != nil {
		p.t.Fatal(err)
	}
	before := live.DeepCopy()
	live.Spec.Replicas = ptr.To(replicas)
	if err := mgmt.Client.Patch(p.ctx, live, client.MergeFrom(before)); err != nil {
		p.t.Fatal(err)
	}
}

// settledPool is a pool of one replica whose Node exists, and its config
// with data and a token.
func (p *stepwise) settledPool() (*clusterv1.MachinePool, *bootstrapv1.KubeadmConfig) {
	pool := p.machinePool("pool", 1)
	setPoolNodes(p.t, p.fixture, pool, "pool-0")
	cfg := p.config("pool", pool, joinSpec(bootstrapv1.CloudConfig, false))
	p.reconcile(p.reconciler(nil, nil), cfg)
	return pool, cfg
}

// recreate deletes cfg and creates it again as a move or a restore does:
// same name, spec, labels, annotations and owners, a new UID, no status.
func (p *stepwise) recreate(cfg *bootstrapv1.KubeadmConfig) *bootstrapv1.KubeadmConfig {
	p.t.Helper()
	p.get(cfg)
	if err := mgmt.Client.Delete(p.ctx, cfg); err != nil {
		p.t.Fatal(err)
	}
	again := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace, Labels: cfg.Labels, Annotations: cfg.Annotations, OwnerReferences: cfg.OwnerReferences},
		Spec:       cfg.Spec,
	}
	p.waitFor("the config to be gone", 10*time.Second, func() bool { return mgmt.Client.Create(p.ctx, again) == nil })
	if again.UID == cfg.UID {
		p.t.Fatal("the config kept its UID")
	}
	return again
}
