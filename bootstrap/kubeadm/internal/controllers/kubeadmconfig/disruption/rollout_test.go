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

package disruption

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
)

// TestRolloutOverUpstream: this provider's components applied over upstream's
// Deployment, then upstream's over this one's. During each rollout the old
// Pod's manager and the new Pod's run at once and elect a leader on the one
// lease both name; upstream's manager finds the lease's namespace in the
// service-account file a Pod has (given here in a mount namespace of its
// own). Never do both lead at once; while upstream's leads, this one writes
// nothing; when the old Pod ends, the new manager takes over and looks after
// what the old one made: the Machines' tokens stay the same and valid past
// their TTL, their data secrets are not rewritten, the pools' tokens rotate.
func TestRolloutOverUpstream(t *testing.T) {
	const ttl = 30 * time.Second
	f := newFixture(t, "rollout", true)
	lw := watchLeaders(t)
	up := lw.add(startUpstream(t, f.ns, ttl))
	lw.waitForLeader(up)
	ours := newDeployment(t, mgmt, f.ns, "--bootstrap-token-ttl="+ttl.String())
	ours.start()
	lw.add(ours.replicas[0])
	f.createMachines(10)
	f.createPools(4)
	f.waitFor(ours, "data for every machine and pool", 2*time.Minute, func() bool { return f.dataCount() == 14 })
	f.expectMadeByUpstream()

	// The old Pod (upstream's) terminates; this manager takes over.
	machines := f.machineData()
	up.Stop()
	swapped := time.Now()
	lw.waitForLeader(ours.replicas[0])
	pools := f.poolTokens()
	f.waitFor(ours, "every pool's token to rotate under this manager", 3*ttl, func() bool { return rotated(pools, f.poolTokens()) == len(pools) })
	time.Sleep(time.Until(swapped.Add(ttl + 2*time.Second)))
	f.expectMachinesKept(machines)

	// Rollback: upstream's Pod starts beside this one and takes over when it ends.
	up = lw.add(startUpstream(t, f.ns, ttl))
	time.Sleep(2 * time.Second)
	if leads, _ := up.Leads(); leads {
		t.Fatal("upstream's manager leads while this one holds the lease")
	}
	machines = f.machineData()
	ours.stop()
	swapped = time.Now()
	lw.waitForLeader(up)
	pools = f.poolTokens()
	f.waitFor(ours, "every pool's token to rotate under upstream's manager", 3*ttl, func() bool { return rotated(pools, f.poolTokens()) == len(pools) })
	time.Sleep(time.Until(swapped.Add(ttl + 2*time.Second)))
	f.expectMachinesKept(machines)
	up.Stop()

	dataSecrets := f.dataSecrets()
	for _, c := range f.configs() {
		f.expectData(c, dataSecrets[c.Name])
	}
	lw.expectOneLeader()
}

// startUpstream starts upstream's manager as its Deployment does, with leader
// election; its Pod's service-account namespace file names ns.
func startUpstream(t *testing.T, ns string, ttl time.Duration) *process.Manager {
	t.Helper()
	kubeconfig, err := mgmt.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	return process.StartManager(t, process.ManagerOptions{
		Binary: upstreamBinary, Name: "upstream", Kubeconfig: kubeconfig,
		WebhookCertDir: mgmt.Webhooks().CertDir,
		Wrap:           process.PodNamespaceWrap(ns),
		Args: []string{
			"--namespace=" + ns,
			"--leader-elect", "--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s",
			"--bootstrap-token-ttl=" + ttl.String(),
			"--feature-gates=KubeadmBootstrapFormatIgnition=true",
			"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields",
		},
	})
}

// leaderWatch samples, until the test ends, which managers lead.
type leaderWatch struct {
	t        *testing.T
	mu       sync.Mutex
	managers []*process.Manager
	both     []string
}

func watchLeaders(t *testing.T) *leaderWatch {
	lw := &leaderWatch{t: t}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			lw.sample()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return lw
}

func (lw *leaderWatch) add(m *process.Manager) *process.Manager {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.managers = append(lw.managers, m)
	return m
}

func (lw *leaderWatch) sample() {
	lw.mu.Lock()
	managers := append([]*process.Manager(nil), lw.managers...)
	lw.mu.Unlock()
	var leading []string
	for _, m := range managers {
		if leads, err := m.Leads(); err == nil && leads {
			leading = append(leading, m.Name)
		}
	}
	if len(leading) > 1 {
		lw.mu.Lock()
		lw.both = append(lw.both, time.Now().Format(time.TimeOnly)+": "+strings.Join(leading, ", "))
		lw.mu.Unlock()
	}
}

// waitForLeader waits until m holds the lease.
func (lw *leaderWatch) waitForLeader(m *process.Manager) {
	lw.t.Helper()
	start := time.Now()
	for {
		if leads, err := m.Leads(); err == nil && leads {
			lw.t.Logf("%s leads after %s", m.Name, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if m.Exited() || time.Since(start) > time.Minute {
			lw.t.Fatalf("%s did not take the lease\n%s", m.Name, m.LogTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (lw *leaderWatch) expectOneLeader() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for _, b := range lw.both {
		lw.t.Errorf("two managers led at once at %s", b)
	}
}

// expectMadeByUpstream checks that every data secret and token is
// upstream's: no data secret names its token (this provider's annotation),
// no spec token has the ID this provider derives.
func (f *fixture) expectMadeByUpstream() {
	f.t.Helper()
	for _, c := range f.configs() {
		sec := &corev1.Secret{}
		f.must(f.client().Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: c.Status.DataSecretName}, sec))
		if id, ok := sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]; ok {
			f.t.Errorf("%s: this provider wrote the data secret (token %s) while upstream's manager led", c.Name, id)
		}
		if tok, err := bootstraptoken.Parse(c.Spec.JoinConfiguration.Discovery.BootstrapToken.Token); err == nil && bootstraptoken.Derived(c.UID, "", tok.ID) {
			f.t.Errorf("%s: this provider made token %s while upstream's manager led", c.Name, tok.ID)
		}
	}
}

// machineRecord is what a Machine's config had at a swap.
type machineRecord struct {
	token, dataVersion string
}

// machineData records each Machine config's token and data secret version.
func (f *fixture) machineData() map[string]machineRecord {
	f.t.Helper()
	out := map[string]machineRecord{}
	for _, c := range f.configs() {
		if !strings.HasPrefix(c.Name, "m-") {
			continue
		}
		sec := &corev1.Secret{}
		f.must(f.client().Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: c.Status.DataSecretName}, sec))
		out[c.Name] = machineRecord{token: c.Spec.JoinConfiguration.Discovery.BootstrapToken.Token, dataVersion: sec.ResourceVersion}
	}
	return out
}

// expectMachinesKept checks that each Machine config still has the token and
// the data secret it had, and that its token is valid.
func (f *fixture) expectMachinesKept(before map[string]machineRecord) {
	f.t.Helper()
	now := f.machineData()
	for name, was := range before {
		is := now[name]
		if is.token != was.token {
			f.t.Errorf("%s: its token changed from %s to %s", name, tokenID(was.token), tokenID(is.token))
		}
		if is.dataVersion != was.dataVersion {
			f.t.Errorf("%s: its data secret was written (resource version %s, then %s)", name, was.dataVersion, is.dataVersion)
		}
		if tok, err := bootstraptoken.Parse(is.token); err != nil {
			f.t.Errorf("%s: %v", name, err)
		} else {
			f.expectValid(name, tok)
		}
	}
}
