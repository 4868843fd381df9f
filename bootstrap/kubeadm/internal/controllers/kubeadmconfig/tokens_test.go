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
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

// testTTL is short so that refreshes happen within a test: the controller
// extends a token of a machine that has not joined at half its TTL.
const testTTL = 20 * time.Second

func expiration(t *testing.T, s *corev1.Secret) time.Time {
	t.Helper()
	exp, err := time.Parse(time.RFC3339, string(s.Data[bootstrapapi.BootstrapTokenExpirationKey]))
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// eventReasons lists the reasons of the events recorded on obj.
func eventReasons(t *testing.T, obj client.Object) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := mgmt.Client.List(context.Background(), list, client.InNamespace(obj.GetNamespace())); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() {
			out = append(out, e.Reason)
		}
	}
	return out
}

func hasEvent(t *testing.T, obj client.Object, reason string) bool {
	for _, r := range eventReasons(t, obj) {
		if r == reason {
			return true
		}
	}
	return false
}

// TestMachineTokenLifecycle follows a worker's token: extended while the
// machine has not joined (one write per half TTL), re-created identically
// after the workload cluster's token cleaner removed it, deleted once the
// machine's Node exists.
func TestMachineTokenLifecycle(t *testing.T) {
	startManager(t, "--bootstrap-token-ttl="+testTTL.String())
	f := newRunningCluster(t)
	machine, cfg := f.machine("slow-worker", false, joinSpec(bootstrapv1.CloudConfig, false))
	sec := f.waitForData(cfg)
	id := sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]
	tok, ok := tokenSecret(t, id)
	if !ok {
		t.Fatalf("token %s not in the workload cluster", id)
	}
	created := expiration(t, tok)
	// The spec holds the token, where upstream's provider reads it too.
	f.get(cfg)
	if got := cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token; got != id+"."+string(tok.Data[bootstrapapi.BootstrapTokenSecretKey]) {
		t.Fatalf("spec.joinConfiguration.discovery.bootstrapToken.token does not hold token %s", id)
	}

	// While the infrastructure is slow, the token is extended before it
	// expires, and no more often than once per half TTL.
	versions := map[string]bool{}
	deadline := time.Now().Add(testTTL + 5*time.Second)
	for time.Now().Before(deadline) {
		tok, ok := tokenSecret(t, id)
		if !ok {
			t.Fatal("the token of a machine that has not joined was removed")
		}
		if !time.Now().Before(expiration(t, tok)) {
			t.Fatal("the token expired before the machine joined")
		}
		versions[tok.ResourceVersion] = true
		time.Sleep(250 * time.Millisecond)
	}
	tok, _ = tokenSecret(t, id)
	if !expiration(t, tok).After(created) {
		t.Fatal("the token was never extended")
	}
	if writes := len(versions) - 1; writes < 1 || writes > 3 {
		t.Errorf("%d writes to the token in %s (TTL %s): want one per half TTL", writes, testTTL+5*time.Second, testTTL)
	}
	if n := len(tokensOf(t, cfg)); n != 1 {
		t.Fatalf("%d tokens for one machine", n)
	}

	// The token cleaner removed it (the controller was down past its expiry,
	// say): it comes back with the same secret, the one the machine has.
	secret := string(tok.Data[bootstrapapi.BootstrapTokenSecretKey])
	if err := workload.Client.Delete(f.ctx, tok); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the token to be re-created", testTTL, func() bool {
		tok, ok = tokenSecret(t, id)
		return ok
	})
	if string(tok.Data[bootstrapapi.BootstrapTokenSecretKey]) != secret {
		t.Fatal("the re-created token has another secret than the machine's data")
	}
	f.waitFor("a BootstrapTokenRecreated event", 10*time.Second, func() bool { return hasEvent(t, cfg, bootstrapv1.BootstrapTokenRecreatedEvent) })

	// The machine joined: its single-use token is deleted at once, without
	// a write to the management cluster.
	f.get(sec)
	f.get(cfg)
	versions = map[string]bool{sec.ResourceVersion: true, cfg.ResourceVersion: true}
	f.setNodeRef(machine, "slow-worker-node")
	f.waitFor("the used token to be deleted", 10*time.Second, func() bool { _, ok := tokenSecret(t, id); return !ok })
	time.Sleep(2 * time.Second)
	f.get(sec)
	f.get(cfg)
	if !versions[sec.ResourceVersion] || !versions[cfg.ResourceVersion] {
		t.Error("releasing the used token wrote the data secret or the config")
	}
	if n := len(tokensOf(t, cfg)); n != 0 {
		t.Fatalf("%d tokens left after the machine joined", n)
	}

	// Operators delete bootstrap secrets after boot: the data was available
	// and used, so the condition stays True (as upstream's), with an event.
	if err := mgmt.Client.Delete(f.ctx, sec); err != nil {
		t.Fatal(err)
	}
	orig := cfg.DeepCopy()
	cfg.Labels = map[string]string{"touched": "after-the-secret-went"}
	if err := mgmt.Client.Patch(f.ctx, cfg, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	f.waitFor("a DataSecretMissing event", 10*time.Second, func() bool { return hasEvent(t, cfg, bootstrapv1.DataSecretMissingEvent) })
	f.get(cfg)
	if c := conditions.Get(cfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("DataSecretAvailable after a used data secret was deleted: %+v, want True", c)
	}
}

// TestMachinePoolTokenRotation: a pool with instances still joining keeps its
// token valid; a settled pool gets a new token and new data at half TTL, and
// the old token stays valid for anyone who picked it up a moment earlier.
func TestMachinePoolTokenRotation(t *testing.T) {
	startManager(t, "--bootstrap-token-ttl="+testTTL.String())
	f := newRunningCluster(t)
	pool := f.machinePool("pool", 2)
	cfg := f.config("pool", pool, joinSpec(bootstrapv1.Ignition, false))
	sec := f.waitForData(cfg)
	first := sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]
	tok, _ := tokenSecret(t, first)
	created := expiration(t, tok)

	// Instances are still joining (no Nodes yet): the token is extended, not replaced.
	f.waitFor("the pool's token to be extended", testTTL, func() bool {
		tok, ok := tokenSecret(t, first)
		return ok && expiration(t, tok).After(created)
	})
	f.get(sec)
	if sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation] != first {
		t.Fatal("the token of a pool with joining instances was replaced")
	}

	// Every instance has its Node: at the next half TTL the token rotates.
	before := pool.DeepCopy()
	pool.Status.NodeRefs = []corev1.ObjectReference{{Kind: "Node", Name: "pool-a"}, {Kind: "Node", Name: "pool-b"}}
	if err := mgmt.Client.Status().Patch(f.ctx, pool, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	var second string
	f.waitFor("the pool's token to rotate", testTTL+5*time.Second, func() bool {
		f.get(sec)
		second = sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]
		return second != "" && second != first
	})
	tok2, ok := tokenSecret(t, second)
	if !ok {
		t.Fatal("the new token is not in the workload cluster")
	}
	_, kubeadmConfig, err := consumers.KubeadmConfigIn("ignition", sec.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kubeadmConfig), "token: "+second+"."+string(tok2.Data[bootstrapapi.BootstrapTokenSecretKey])) {
		t.Fatal("the data secret does not carry the new token")
	}
	if err := consumers.BootstrapData("ignition", sec.Data["value"]); err != nil {
		t.Error(err)
	}
	if old, ok := tokenSecret(t, first); !ok || !time.Now().Add(testTTL/2).Before(expiration(t, old)) {
		t.Error("the replaced token must stay valid for instances that picked it up just before")
	}
	f.waitFor("a BootstrapTokenRotated event", 10*time.Second, func() bool { return hasEvent(t, cfg, bootstrapv1.BootstrapTokenRotatedEvent) })
	if f.get(cfg); cfg.Status.DataSecretName != sec.Name {
		t.Errorf("the rotation moved the pool's data from %s to %s: its instances would roll", sec.Name, cfg.Status.DataSecretName)
	}
	if n := len(tokensOf(t, cfg)); n != 2 {
		t.Errorf("%d tokens after one rotation, want the old and the new", n)
	}
}

// machinePool creates a MachinePool of replicas whose bootstrap config is
// the KubeadmConfig of the same name.
func (f *fixture) machinePool(name string, replicas int32) *clusterv1.MachinePool {
	f.t.Helper()
	pool := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: f.cluster.Name}},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: f.cluster.Name,
			Replicas:    ptr.To(replicas),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: f.cluster.Name,
				Version:     kubernetesVersion,
				Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name,
				}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachinePool", Name: name},
			}},
		},
	}
	f.create(pool)
	return pool
}
