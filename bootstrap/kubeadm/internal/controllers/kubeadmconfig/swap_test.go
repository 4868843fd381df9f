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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

var (
	upstreamOnce sync.Once
	upstreamBin  string
	upstreamErr  error
)

// upstreamManager starts upstream's kubeadm bootstrap manager, built from the
// Cluster API module version go.mod pins, watching f's namespace. Admission
// stays this provider's (upstream's manager serves no defaulting webhook for
// KubeadmConfig at the path the installed configuration names); stop ends
// both.
func upstreamManager(t *testing.T, f *fixture, ttl time.Duration) (stop func()) {
	t.Helper()
	upstreamOnce.Do(func() {
		dir, err := os.MkdirTemp("", "upstream-bin-")
		if err != nil {
			upstreamErr = err
			return
		}
		upstreamBin = filepath.Join(dir, "manager")
		upstreamErr = process.Build(upstreamBin, "sigs.k8s.io/cluster-api/bootstrap/kubeadm")
	})
	if upstreamErr != nil {
		t.Fatalf("building upstream's manager: %v", upstreamErr)
	}
	kubeconfig, err := mgmt.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	stopWebhooks := mgmt.StartWebhooks(t, allGates(t))
	m := process.StartManager(t, process.ManagerOptions{
		Binary: upstreamBin, Name: "upstream", Kubeconfig: kubeconfig,
		WebhookCertDir: mgmt.Webhooks().CertDir,
		Args: []string{
			"--namespace=" + f.ns,
			"--bootstrap-token-ttl=" + ttl.String(),
			"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields",
		},
	})
	return func() {
		m.Stop()
		stopWebhooks()
	}
}

// specToken is the token in cfg's spec, read now.
func (f *fixture) specToken(cfg *bootstrapv1.KubeadmConfig) bootstraptoken.Token {
	f.t.Helper()
	f.get(cfg)
	tok, err := bootstraptoken.Parse(cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token)
	if err != nil {
		f.t.Fatalf("%s: spec.joinConfiguration.discovery.bootstrapToken.token: %v", cfg.Name, err)
	}
	return tok
}

// waitForExtension waits until the token id expires later than after.
func (f *fixture) waitForExtension(who string, id string, after time.Time, timeout time.Duration) time.Time {
	f.t.Helper()
	var got time.Time
	f.waitFor(who+" to extend token "+id, timeout, func() bool {
		s, ok := tokenSecret(f.t, id)
		if !ok {
			f.t.Fatalf("token %s is gone from the workload cluster", id)
		}
		got = expiration(f.t.(*testing.T), s)
		return got.After(after)
	})
	return got
}

// waitForRotation waits until the pool's spec names another token than old,
// and its data secret carries it; it returns the new token.
func (f *fixture) waitForRotation(who string, cfg *bootstrapv1.KubeadmConfig, old bootstraptoken.Token, timeout time.Duration) bootstraptoken.Token {
	f.t.Helper()
	var tok bootstraptoken.Token
	f.waitFor(who+" to rotate the pool's token", timeout, func() bool {
		tok = f.specToken(cfg)
		if tok.ID == old.ID {
			return false
		}
		f.get(cfg)
		sec := &corev1.Secret{}
		if err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Status.DataSecretName}, sec); err != nil {
			return false
		}
		_, kubeadm, err := consumers.KubeadmConfigIn(string(sec.Data["format"]), sec.Data["value"])
		return err == nil && containsAny(string(kubeadm), "token: "+tok.Value()) != ""
	})
	return tok
}

// TestSwapWithUpstream swaps upstream's real manager and this one on live
// objects, both ways: upstream creates data and tokens for a worker still
// booting and a MachinePool; this manager keeps upstream's tokens (the same
// token in the spec, extended, no new one, the data secret not rewritten)
// and rotates the pool's; a worker created under this manager and the pool
// are then kept and rotated by upstream's after the swap back, which reads
// the tokens where this one records them.
func TestSwapWithUpstream(t *testing.T) {
	const ttl = 20 * time.Second
	f := newRunningCluster(t)
	t.Cleanup(func() {
		if t.Failed() {
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, f.ns) {
					t.Log(line)
				}
			}
		}
	})
	before := map[string]bool{}
	for _, s := range allTokens(t) {
		before[s.Name] = true
	}

	// Upstream's provider: a worker that has not joined, a pool still scaling.
	stopUpstream := upstreamManager(t, f, ttl)
	_, w0 := f.machine("w-0", false, joinSpec(bootstrapv1.CloudConfig, false))
	pool := f.machinePool("pool", 2)
	poolCfg := f.config("pool", pool, joinSpec(bootstrapv1.CloudConfig, false))
	w0Data := f.waitForData(w0)
	f.waitForData(poolCfg)
	t0, p1 := f.specToken(w0), f.specToken(poolCfg)
	s0, ok := tokenSecret(t, t0.ID)
	if !ok {
		t.Fatal("upstream's token for w-0 is not in the workload cluster")
	}
	stopUpstream()

	// This provider takes over.
	stop := startManager(t, "--bootstrap-token-ttl="+ttl.String())
	f.waitForExtension("this manager", t0.ID, expiration(t, s0), 2*ttl)
	if got := f.specToken(w0); got != t0 {
		t.Fatalf("w-0's token changed from %s to %s", t0, got)
	}
	if n := len(tokensOf(t, w0)); n != 0 {
		t.Fatalf("this manager made %d tokens of its own for w-0, which has upstream's", n)
	}
	// One look after the adoption later (half a TTL), it is still reported once.
	f.waitForExtension("this manager, again", t0.ID, expiration(t, mustToken(t, t0.ID)), 2*ttl)
	if n := eventCount(t, w0, bootstrapv1.BootstrapTokenAdoptedEvent); n != 1 {
		t.Errorf("w-0's token adoption reported %d times, want once", n)
	}
	_, w1 := f.machine("w-1", false, joinSpec(bootstrapv1.CloudConfig, false))
	f.waitForData(w1)
	t1 := f.specToken(w1)
	s1, _ := tokenSecret(t, t1.ID)
	setPoolNodes(t, f, pool, "pool-a", "pool-b")
	p2 := f.waitForRotation("this manager", poolCfg, p1, 2*ttl)
	stop()

	// And back to upstream's.
	upstreamManager(t, f, ttl)
	f.waitForExtension("upstream's manager", t1.ID, expiration(t, s1), 2*ttl)
	f.waitForRotation("upstream's manager", poolCfg, p2, 2*ttl)
	if got := f.specToken(w1); got != t1 {
		t.Fatalf("w-1's token changed from %s to %s", t1, got)
	}
	if got := f.specToken(w0); got != t0 {
		t.Fatalf("w-0's token changed from %s to %s", t0, got)
	}
	version := w0Data.ResourceVersion
	f.get(w0Data)
	if w0Data.ResourceVersion != version {
		t.Error("w-0's data secret was written again")
	}
	// Tokens made meanwhile: the workers' one each, and the pool's.
	for _, s := range allTokens(t) {
		if before[s.Name] {
			continue
		}
		id := string(s.Data["token-id"])
		if id != t0.ID && id != t1.ID && !isPoolToken(s) {
			t.Errorf("token %s is neither a worker's nor the pool's", id)
		}
	}
}

// isPoolToken: a token either provider made that no worker's spec names.
func isPoolToken(s corev1.Secret) bool {
	return len(s.Data["description"]) > 0 && containsAny(string(s.Data["description"]), bootstrapv1.BootstrapTokenDescription) != "" &&
		(string(s.Data["description"]) == bootstrapv1.BootstrapTokenDescription || containsAny(string(s.Data["description"]), "/pool") != "")
}

// setPoolNodes gives the pool a Node per replica: it is settled.
func setPoolNodes(t *testing.T, f *fixture, pool *clusterv1.MachinePool, nodes ...string) {
	t.Helper()
	before := pool.DeepCopy()
	pool.Status.NodeRefs = nil
	for _, n := range nodes {
		pool.Status.NodeRefs = append(pool.Status.NodeRefs, corev1.ObjectReference{Kind: "Node", Name: n})
	}
	if err := mgmt.Client.Status().Patch(f.ctx, pool, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// allTokens lists the workload cluster's bootstrap tokens.
func allTokens(t *testing.T) []corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := workload.Client.List(context.Background(), list, client.InNamespace(metav1.NamespaceSystem)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Secret
	for _, s := range list.Items {
		if s.Type == bootstrapapi.SecretTypeBootstrapToken {
			out = append(out, s)
		}
	}
	return out
}

func mustToken(t *testing.T, id string) *corev1.Secret {
	t.Helper()
	s, ok := tokenSecret(t, id)
	if !ok {
		t.Fatalf("token %s is not in the workload cluster", id)
	}
	return s
}

// eventCount is how often an event with reason was recorded on cfg (a
// repeated event is one Event with a series).
func eventCount(t *testing.T, cfg *bootstrapv1.KubeadmConfig, reason string) int {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := mgmt.Client.List(context.Background(), list, client.InNamespace(cfg.Namespace)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.UID != cfg.UID || e.Reason != reason {
			continue
		}
		n++
		if e.Series != nil {
			n += int(e.Series.Count) - 1
		}
	}
	return n
}

// TestPoolTokenGoneBeforeASwapIsReplaced: upstream's provider made a pool's
// data and token; the token cleaner removed the token before this provider
// first looked (upstream's records nothing of it on the data). No instance
// can join with it any more: this provider replaces it, as upstream's does
// a pool token that is gone, and the pool's data carries the new one.
func TestPoolTokenGoneBeforeASwapIsReplaced(t *testing.T) {
	const ttl = 20 * time.Second
	f := newRunningCluster(t)
	stopUpstream := upstreamManager(t, f, ttl)
	pool := f.machinePool("pool", 2)
	cfg := f.config("pool", pool, joinSpec(bootstrapv1.CloudConfig, false))
	f.waitForData(cfg)
	gone := f.specToken(cfg)
	stopUpstream()
	if err := workload.Client.Delete(f.ctx, mustToken(t, gone.ID)); err != nil {
		t.Fatal(err)
	}

	startManager(t, "--bootstrap-token-ttl="+ttl.String())
	tok := f.waitForRotation("this manager", cfg, gone, ttl)
	f.get(pool)
	if s := mustToken(t, tok.ID); string(s.Data[bootstrapapi.BootstrapTokenSecretKey]) != tok.Secret {
		t.Error("the new token in the workload cluster is not the spec's")
	}
	f.waitFor("a BootstrapTokenRotated event", 10*time.Second, func() bool { return hasEvent(t, cfg, bootstrapv1.BootstrapTokenRotatedEvent) })
}
