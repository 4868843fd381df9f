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
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/workload"

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
	home := workload.StartManagement(t, workload.ManagementInput{Stack: st, Name: "swap-home", ManagerArgs: managerArgs})
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

	w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Management: home, Name: "swap"})
	sc := swapScenario{t: t, w: w, tokens: w.WatchSpecTokens(), pool: "swap-pool", md: "swap-slow", rotation: 3 * ttl}
	w.AddControlPlaneMachine("swap-cp-0", bootstrapv1.CloudConfig)
	w.AddMachineDeployment(sc.md, bootstrapv1.CloudConfig, 1, slowBoot)
	w.Create(w.Objects.MachinePool(sc.pool, bootstrapv1.CloudConfig, 1)...)
	w.WaitForPools(map[string]bootstrapv1.Format{sc.pool: bootstrapv1.CloudConfig}, 1, 5*time.Minute)
	w.ExpectMadeByUpstream()

	// README's swap, while the worker boots.
	sc.swap("README's swap to this provider", func() error { return home.ReplaceProvider(ours) }, 2)

	target := <-targetUp
	targetUp <- target
	if target == nil {
		t.FailNow()
	}
	sc.tokens.Watch(target.Client)
	// clusterctl move, while a pool instance boots.
	sc.move("clusterctl move to another management cluster", func() { w.Move(target) })
	w.RotateAndScale(sc.pool, int32(len(w.SimulatedPool(sc.pool).Status.Instances)+1), sc.rotation)
	sc.tokens.ExpectNoStray(w)
	// The target lost after a backup, restored into the first.
	sc.move("backup, loss and restore into the first management cluster", func() { w.BackUpAndRestore(home) })

	// Back to upstream's by applying its components over this Deployment,
	// while another worker boots (its data and token made by this provider).
	sc.machines = w.Keep().Machines
	w.Scale(sc.md, 2)
	sc.swap("upstream's components rolled out over this provider's", func() error { return home.RollOutProvider(upstream) }, 3)
	w.ExpectPoolConsumers(sc.pool, bootstrapv1.CloudConfig)
}

// swapScenario is a cluster with a MachineDeployment of slow workers and a
// MachinePool, whose provider is swapped.
type swapScenario struct {
	t        *testing.T
	w        *workload.Cluster
	tokens   *workload.SpecTokens
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
	sc.t.Helper()
	booting := w.BootingWorker(sc.md, sc.machines)
	kept := w.Keep()
	start := time.Now()
	if err := do(); err != nil {
		sc.t.Fatalf("%s: %v", how, err)
	}
	sc.t.Logf("%s in %s", how, time.Since(start).Round(100*time.Millisecond))
	w.ExpectBooting(booting)
	w.RotateAndScale(sc.pool, int32(len(w.SimulatedPool(sc.pool).Status.Instances)+1), sc.rotation)
	w.WaitForMachines(machines, 4*time.Minute)
	kept.ExpectKept(w)
	sc.tokens.ExpectNoStray(w)
	sc.machines = w.Keep().Machines
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
	sc.t.Helper()
	// Right after a rotation, so that the instance boots with a token whose
	// provider rotates it away no sooner than a rotation period later.
	w.WaitForRotation(sc.pool, sc.rotation)
	instance := w.BootPoolInstance(sc.pool, poolBoot)
	n := int32(len(w.SimulatedPool(sc.pool).Status.Instances))
	before := w.BeforeMove()
	start := time.Now()
	do()
	sc.t.Logf("%s in %s", how, time.Since(start).Round(100*time.Millisecond))
	w.WaitForPools(map[string]bootstrapv1.Format{sc.pool: bootstrapv1.CloudConfig}, n, 4*time.Minute)
	w.ExpectPoolInstanceJoined(sc.pool, instance)
	before.ExpectMoved(w)
	sc.tokens.ExpectNoStray(w)
}
