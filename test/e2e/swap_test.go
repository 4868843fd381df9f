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

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
)

// TestSwapAndMoveLive: on a management cluster of its own, a workload
// cluster made by upstream's v1.14.2 bootstrap provider, built from the
// module (a control-plane Machine, a MachineDeployment whose worker boots
// slowly, a MachinePool), gets this provider by README's swap (upstream's
// components removed, this one's installed) while the worker still boots;
// then `clusterctl move` takes it to a second management cluster while a
// pool instance boots; then that management cluster is lost after a
// `clusterctl move --to-directory` backup, which is restored into the first
// (new UIDs again) while another instance boots; last, upstream's provider
// comes back by applying its components over this Deployment (both managers
// run at once on the one lease) while another worker boots. Every manager
// keeps a 30-s token TTL, so a machine booting for longer joins only if each
// keeps alive the token the one before made. After each swap: the booting
// worker joins with the token it was given; the pool's token rotates under
// the new manager and the pool scales up, the new instance joining with the
// rotated data; no Machine's data secret is rewritten, no Machine or
// MachineSet replaced (no rollout). After the move and the restore: the
// booting instance joins; the same Machines, MachineSets and data; every data
// secret owned by its config's new UID (none deleted by the garbage
// collector); after the move, the pool's token rotates under the target's
// manager. Throughout, every bootstrap token a provider made in the workload
// cluster is one a config's spec named (no duplicates, none orphaned).
func TestSwapAndMoveLive(t *testing.T) {
	t.Parallel() // on management clusters of its own
	const (
		ttl      = 30 * time.Second
		slowBoot = 100 * time.Second
	)
	ttlArgs := append([]string{"--bootstrap-token-ttl=" + ttl.String()}, managerArgs...)
	home := startManagement(t, "swap-home", managerArgs...)
	// clusterctl move's target, started meanwhile.
	targetUp := make(chan *stack.Management, 1)
	go func() {
		m, err := st.StartManagement(context.Background(), "swap-target", ttlArgs...)
		if err != nil {
			t.Errorf("starting the target management cluster: %v", err)
		}
		targetUp <- m
	}()
	t.Cleanup(func() {
		if m := <-targetUp; m != nil {
			m.Stop()
		}
	})
	upstream, err := home.UpstreamProvider()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := home.OurProvider()
	if err != nil {
		t.Fatal(err)
	}
	upstream = upstream.With("--bootstrap-token-ttl="+ttl.String(), "--feature-gates=KubeadmBootstrapFormatIgnition=true").WithLeaderElection()
	ours = ours.With(ttlArgs...).WithLeaderElection()
	if err := home.ReplaceProvider(upstream); err != nil {
		t.Fatalf("installing upstream's provider: %v", err)
	}

	w := newWorkloadClusterIn(t, home, "swap", func(w *workloadCluster) []client.Object { return w.Base() })
	sc := swapScenario{w: w, tokens: w.watchSpecTokens(), pool: "swap-pool", md: "swap-slow", rotation: 3 * ttl}
	w.controlPlaneMachine("swap-cp-0", bootstrapv1.CloudConfig)
	w.machineDeployment(sc.md, bootstrapv1.CloudConfig, 1, slowBoot)
	w.create(w.MachinePool(sc.pool, bootstrapv1.CloudConfig, 1)...)
	w.waitForPools(map[string]bootstrapv1.Format{sc.pool: bootstrapv1.CloudConfig}, 1, 5*time.Minute)
	w.expectMadeByUpstream()

	// README's swap, while the worker boots.
	sc.swap("README's swap to this provider", func() error { return home.ReplaceProvider(ours) }, 2)

	target := <-targetUp
	targetUp <- target
	if target == nil {
		t.FailNow()
	}
	sc.tokens.watch(target.Client)
	// clusterctl move, while a pool instance boots.
	sc.move("clusterctl move to another management cluster", func() { w.move(target) })
	w.rotateAndScale(sc.pool, int32(len(w.simulatedPool(sc.pool).Status.Instances)+1), sc.rotation)
	sc.tokens.expectNoStray(w)
	// The target lost after a backup, restored into the first.
	sc.move("backup, loss and restore into the first management cluster", func() { w.backUpAndRestore(home) })

	// Back to upstream's by applying its components over this Deployment,
	// while another worker boots (its data and token made by this provider).
	sc.machines = w.keep().machines
	w.scale(sc.md, 2)
	sc.swap("upstream's components rolled out over this provider's", func() error { return home.RollOutProvider(upstream) }, 3)
	w.expectPoolConsumers(sc.pool, bootstrapv1.CloudConfig)
}

// swapScenario is a cluster with a MachineDeployment of slow workers and a
// MachinePool, whose provider is swapped.
type swapScenario struct {
	w        *workloadCluster
	tokens   *specTokens
	pool, md string
	rotation time.Duration // within which the pool's token rotates
	machines map[string]string
}

// swap swaps the provider (do) while a new worker of the MachineDeployment
// boots, then checks: the worker joins (there are then machines Machines);
// the pool's token rotates under the new manager and the pool, scaled up by
// one, boots its new instance with the rotated data; what the swap must keep
// is kept; no stray token.
func (sc *swapScenario) swap(how string, do func() error, machines int) {
	w := sc.w
	w.t.Helper()
	booting := w.bootingWorker(sc.md, sc.machines)
	kept := w.keep()
	start := time.Now()
	if err := do(); err != nil {
		w.t.Fatalf("%s: %v", how, err)
	}
	w.t.Logf("%s in %s", how, time.Since(start).Round(100*time.Millisecond))
	w.expectBooting(booting)
	w.rotateAndScale(sc.pool, int32(len(w.simulatedPool(sc.pool).Status.Instances)+1), sc.rotation)
	w.waitForMachines(machines, 4*time.Minute)
	kept.expectKept(w)
	sc.tokens.expectNoStray(w)
	sc.machines = w.keep().machines
}

// poolBoot is how long a pool instance boots across a move: longer than the
// token TTL, so that it joins only if the manager after the move keeps its
// token alive.
const poolBoot = 60 * time.Second

// move moves the cluster's objects to another management cluster (do)
// while a pool instance boots, then checks: the instance joins; the
// Machines, MachineSets and data are as they were, each data secret owned by
// its config's new UID; no stray token.
func (sc *swapScenario) move(how string, do func()) {
	w := sc.w
	w.t.Helper()
	instance := w.bootPoolInstance(sc.pool, poolBoot)
	n := int32(len(w.simulatedPool(sc.pool).Status.Instances))
	before := w.beforeMove()
	start := time.Now()
	do()
	w.t.Logf("%s in %s", how, time.Since(start).Round(100*time.Millisecond))
	w.waitForPools(map[string]bootstrapv1.Format{sc.pool: bootstrapv1.CloudConfig}, n, 4*time.Minute)
	w.expectPoolInstanceJoined(sc.pool, instance)
	before.expectMoved(w)
	sc.tokens.expectNoStray(w)
}

// bootingWorker waits until a MachineDeployment has a Machine (not among
// known) with its data and no Node yet, and returns its name. The swap must
// find it booting, or the test would prove nothing about its token.
func (w *workloadCluster) bootingWorker(md string, known map[string]string) string {
	w.t.Helper()
	var name string
	w.waitFor(3*time.Minute, "a booting worker of "+md, func() bool {
		var machines clusterv1.MachineList
		if err := w.c.List(context.Background(), &machines, client.InNamespace(w.Namespace),
			client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil {
			return false
		}
		for _, m := range machines.Items {
			if _, old := known[m.Name]; !old && m.Spec.Bootstrap.DataSecretName != nil {
				name = m.Name
				return true
			}
		}
		return false
	})
	w.expectBooting(name)
	return name
}

// expectBooting fails the test when the Machine already has its Node.
func (w *workloadCluster) expectBooting(machine string) {
	w.t.Helper()
	m := &clusterv1.Machine{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, machine), m); err != nil {
		w.t.Fatal(err)
	}
	if m.Status.NodeRef.IsDefined() {
		w.t.Fatalf("machine %s joined before the swap: its boot did not span it", machine)
	}
}

// rotateAndScale waits until the pool's token rotates (the running manager
// makes a new one for its next instances), then scales the pool to replicas
// and checks the new instances booted with the rotated data.
func (w *workloadCluster) rotateAndScale(pool string, replicas int32, within time.Duration) {
	w.t.Helper()
	before := w.poolTokenID(pool)
	w.waitFor(within, "the pool's token to rotate", func() bool { return w.poolTokenID(pool) != before })
	old := len(w.simulatedPool(pool).Status.Instances)
	w.scalePool(pool, replicas)
	w.waitForPools(map[string]bootstrapv1.Format{pool: bootstrapv1.CloudConfig}, replicas, 4*time.Minute)
	instances := w.simulatedPool(pool).Status.Instances
	for _, in := range instances[old:] {
		for _, earlier := range instances[:old] {
			if in.DataSecretVersion == earlier.DataSecretVersion {
				w.t.Errorf("pool %s: instance %s booted with the data %s did, not the rotated one", pool, in.Name, earlier.Name)
			}
		}
	}
}

// expectMadeByUpstream checks that upstream's manager made every data secret
// and token so far: none carries this provider's annotation.
func (w *workloadCluster) expectMadeByUpstream() {
	w.t.Helper()
	for _, s := range w.dataSecretObjects() {
		if id, ok := s.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]; ok {
			w.t.Errorf("data secret %s was written by this provider (token %s) while upstream's ran", s.Name, id)
		}
	}
}

// dataSecretObjects returns the namespace's bootstrap data secrets by name.
func (w *workloadCluster) dataSecretObjects() map[string]corev1.Secret {
	w.t.Helper()
	var secrets corev1.SecretList
	if err := w.c.List(context.Background(), &secrets, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]corev1.Secret{}
	for _, s := range secrets.Items {
		if s.Type == clusterv1.ClusterSecretType && len(s.OwnerReferences) > 0 && s.OwnerReferences[0].Kind == "KubeadmConfig" && s.Name == s.OwnerReferences[0].Name {
			out[s.Name] = s
		}
	}
	return out
}

// kept is what a swap must leave as it is: the Machines and MachineSets (a
// replaced one is a rollout) and the Machines' data secrets (by resource
// version: not rewritten).
type kept struct {
	machines, machineSets, data map[string]string
}

func (w *workloadCluster) keep() kept {
	w.t.Helper()
	k := kept{machines: map[string]string{}, machineSets: map[string]string{}, data: map[string]string{}}
	var machines clusterv1.MachineList
	var sets clusterv1.MachineSetList
	if err := w.c.List(context.Background(), &machines, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.List(context.Background(), &sets, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	data := w.dataSecretObjects()
	for _, m := range machines.Items {
		k.machines[m.Name] = string(m.UID)
		if s, ok := data[m.Name]; ok {
			k.data[m.Name] = s.ResourceVersion
		}
	}
	for _, s := range sets.Items {
		k.machineSets[s.Name] = string(s.UID)
	}
	return k
}

func (k kept) expectKept(w *workloadCluster) {
	w.t.Helper()
	now := w.keep()
	for _, c := range []struct {
		what         string
		before, left map[string]string
	}{{"Machine", k.machines, now.machines}, {"MachineSet", k.machineSets, now.machineSets}, {"data secret", k.data, now.data}} {
		for name, v := range c.before {
			if c.left[name] != v {
				w.t.Errorf("%s %s changed across the swap (%q, now %q)", c.what, name, v, c.left[name])
			}
		}
	}
}

// specTokens records, every second until the test ends, the bootstrap token
// ID each config's spec names: the source of truth both providers share.
type specTokens struct {
	mu      sync.Mutex
	seen    map[string][]string // config -> token IDs in the order seen
	sources []client.Client     // management clusters the configs may be in
}

// watchSpecTokens samples the configs in the cluster's management cluster
// and in those added by watch.
func (w *workloadCluster) watchSpecTokens() *specTokens {
	st := &specTokens{seen: map[string][]string{}, sources: []client.Client{w.c}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			st.mu.Lock()
			sources := slices.Clone(st.sources)
			st.mu.Unlock()
			for _, source := range sources {
				var configs bootstrapv1.KubeadmConfigList
				if err := source.List(ctx, &configs, client.InNamespace(w.Namespace)); err != nil {
					continue // a lost management cluster
				}
				st.mu.Lock()
				for _, c := range configs.Items {
					id, _, _ := strings.Cut(c.Spec.JoinConfiguration.Discovery.BootstrapToken.Token, ".")
					if ids := st.seen[c.Name]; id != "" && (len(ids) == 0 || ids[len(ids)-1] != id) {
						st.seen[c.Name] = append(ids, id)
					}
				}
				st.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	w.t.Cleanup(func() { cancel(); <-done })
	return st
}

// watch adds a management cluster the configs may be moved to.
func (s *specTokens) watch(c client.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sources = append(s.sources, c)
}

// expectNoStray checks every bootstrap token a provider made in the workload
// cluster was named by a config's spec, and that no Machine's config ever
// named more than one (a MachinePool's rotates).
func (s *specTokens) expectNoStray(w *workloadCluster) {
	w.t.Helper()
	secrets, err := w.workloadClient().CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(),
		metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeBootstrapToken)})
	if err != nil {
		w.t.Fatal(err)
	}
	// A rotation in flight makes its token just before it names it in the
	// spec: compare after the sampler has looked a few more times.
	time.Sleep(3 * time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	named := map[string]string{}
	for config, ids := range s.seen {
		for _, id := range ids {
			named[id] = config
		}
		if !strings.HasSuffix(config, "-pool") && len(ids) > 1 {
			w.t.Errorf("config %s named tokens %v: a Machine's token was replaced", config, ids)
		}
	}
	var stray []string
	made := 0
	for _, sec := range secrets.Items {
		// Every token a kubeadm bootstrap provider makes (upstream's and
		// this one's alike) has this description; kubeadm init's own has
		// another.
		description := string(sec.Data["description"])
		if !strings.HasPrefix(description, bootstrapv1.BootstrapTokenDescription) {
			continue
		}
		made++
		if id := strings.TrimPrefix(sec.Name, "bootstrap-token-"); named[id] == "" {
			stray = append(stray, fmt.Sprintf("%s (%q)", id, description))
		}
	}
	if len(stray) > 0 {
		w.t.Errorf("bootstrap tokens no config named: %v (named: %s)", stray, fmt.Sprint(slices.Sorted(maps.Keys(named))))
		return
	}
	w.t.Logf("%d bootstrap tokens made by a provider in the workload cluster, each named by a config's spec", made)
}
