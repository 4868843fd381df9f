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

package workload

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// MoveTo makes the test read and write the cluster's objects in management
// cluster m.
func (w *Cluster) MoveTo(m *stack.Management) {
	w.mgmt, w.c = m, m.Client
}

// Clusterctl runs Cluster API's clusterctl v1.14.2 with its configuration
// directory of its own (not the user's).
func (w *Cluster) Clusterctl(args ...string) {
	w.t.Helper()
	dir := w.t.TempDir()
	start := time.Now()
	cmd := exec.Command(testbin.MustPath(w.t, "clusterctl"), append(args, "-v", "2")...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("clusterctl %v: %v\n%s", args, err, out)
	}
	w.t.Logf("clusterctl %s took %s", args[0], time.Since(start).Round(100*time.Millisecond))
}

// Move moves the cluster's namespace to management cluster to with
// `clusterctl move`.
func (w *Cluster) Move(to *stack.Management) {
	w.t.Helper()
	w.Clusterctl("move", "--kubeconfig", w.mgmt.Kubeconfig, "--to-kubeconfig", to.Kubeconfig, "--namespace", w.Namespace)
	w.MoveTo(to)
}

// BackUpAndRestore backs the cluster's namespace up with `clusterctl move
// --to-directory`, loses its management cluster (stopped: API server,
// controllers, manager; the hosts run on) and restores the backup into
// management cluster to with `clusterctl move --from-directory`: every
// object anew, with new UIDs.
func (w *Cluster) BackUpAndRestore(to *stack.Management) {
	w.t.Helper()
	backup := filepath.Join(w.t.TempDir(), "backup")
	if err := os.Mkdir(backup, 0o700); err != nil {
		w.t.Fatal(err)
	}
	w.Clusterctl("move", "--kubeconfig", w.mgmt.Kubeconfig, "--to-directory", backup, "--namespace", w.Namespace)
	w.mgmt.Stop()
	w.Clusterctl("move", "--from-directory", backup, "--to-kubeconfig", to.Kubeconfig)
	w.MoveTo(to)
}

// Moved is what a move or restore must carry over: the Machines and
// MachineSets (by name: new objects, none added or gone, which would be a
// rollout), every config's data secret, and each Machine's unchanged (a
// pool's may rotate meanwhile).
type Moved struct {
	machines, machineSets, data []string
	machineData                 map[string][32]byte
}

// BeforeMove records what a move or restore must carry over.
func (w *Cluster) BeforeMove() Moved {
	w.t.Helper()
	k := w.Keep()
	mv := Moved{
		machines: slices.Sorted(maps.Keys(k.Machines)), machineSets: slices.Sorted(maps.Keys(k.machineSets)),
		machineData: map[string][32]byte{},
	}
	secrets := w.DataSecretObjects()
	mv.data = slices.Sorted(maps.Keys(secrets))
	for name, s := range secrets {
		if _, ok := k.Machines[name]; ok {
			mv.machineData[name] = sha256.Sum256(s.Data["value"])
		}
	}
	return mv
}

// ExpectMoved checks the management cluster the cluster is now in has what
// it had before, and that every data secret's controller is its
// KubeadmConfig there (the new UID): owned by a UID that is not there, the
// garbage collector would have deleted it.
func (mv Moved) ExpectMoved(w *Cluster) {
	w.t.Helper()
	now := w.BeforeMove()
	if !slices.Equal(now.machines, mv.machines) || !slices.Equal(now.machineSets, mv.machineSets) {
		w.t.Errorf("Machines %v and MachineSets %v before, now %v and %v", mv.machines, mv.machineSets, now.machines, now.machineSets)
	}
	if !slices.Equal(now.data, mv.data) {
		w.t.Errorf("data secrets %v before, now %v", mv.data, now.data)
	}
	for name, sum := range mv.machineData {
		if now.machineData[name] != sum {
			w.t.Errorf("Machine %s's data secret was rewritten", name)
		}
	}
	var configs bootstrapv1.KubeadmConfigList
	if err := w.c.List(context.Background(), &configs, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	uids := map[string]string{}
	for _, c := range configs.Items {
		uids[c.Name] = string(c.UID)
	}
	for name, s := range w.DataSecretObjects() {
		// A MachinePool's data secret is named by revision, not after its config.
		if ref := metav1.GetControllerOf(&s); ref == nil || ref.Kind != "KubeadmConfig" || uids[ref.Name] == "" || string(ref.UID) != uids[ref.Name] {
			w.t.Errorf("data secret %s: its controller is %v, not a KubeadmConfig's new UID", name, ref)
		}
	}
	w.t.Logf("%d Machines, %d MachineSets and %d data secrets as they were (the Machines' unchanged), each owned by its config's new UID",
		len(now.machines), len(now.machineSets), len(now.data))
}

// BootPoolInstance scales a pool up by one instance that boots for bootDelay
// before it runs its data, and waits until it boots (listed in the pool's
// provider IDs, as the cloud has it).
func (w *Cluster) BootPoolInstance(pool string, bootDelay time.Duration) string {
	w.t.Helper()
	w.SetPoolBootDelay(pool, bootDelay)
	n := len(w.SimulatedPool(pool).Status.Instances)
	w.ScalePool(pool, int32(n+1))
	var name string
	w.WaitFor(time.Minute, "a booting instance of "+pool, func() bool {
		smp := w.SimulatedPool(pool)
		if len(smp.Status.Instances) != n+1 || len(smp.Spec.ProviderIDList) != n+1 {
			return false
		}
		in := smp.Status.Instances[n]
		name = in.Name
		return in.HostPhase == infrav1.HostBooting
	})
	w.SetPoolBootDelay(pool, 0)
	return name
}

// SetPoolBootDelay sets how long a pool's next instances boot.
func (w *Cluster) SetPoolBootDelay(pool string, d time.Duration) {
	w.t.Helper()
	smp := w.SimulatedPool(pool)
	patch := client.MergeFrom(smp.DeepCopy())
	smp.Spec.BootDelay = ptr.To(metav1.Duration{Duration: d})
	if err := w.c.Patch(context.Background(), smp, patch); err != nil {
		w.t.Fatal(err)
	}
}

// ExpectPoolInstanceJoined fails the test unless the pool's instance has
// its Node in the pool's node references.
func (w *Cluster) ExpectPoolInstanceJoined(pool, instance string) {
	w.t.Helper()
	mp := w.machinePool(pool)
	for _, ref := range mp.Status.NodeRefs {
		if ref.Name == instance {
			return
		}
	}
	w.t.Errorf("pool %s: instance %s has no Node (%s)", pool, instance, fmt.Sprint(mp.Status.NodeRefs))
}

// ManagementInput says how StartManagement starts a management cluster.
type ManagementInput struct {
	Stack *stack.Stack
	Name  string
	// ManagerArgs are this provider's manager's flags there.
	ManagerArgs []string
}

// StartManagement starts a management cluster of the test's own over the
// stack's hosts; it stops with the test (after the test's workload clusters
// went, whose cleanups come later).
func StartManagement(t testing.TB, in ManagementInput) *stack.Management {
	t.Helper()
	m, err := in.Stack.StartManagement(context.Background(), in.Name, in.ManagerArgs...)
	if err != nil {
		t.Fatalf("starting management cluster %s: %v", in.Name, err)
	}
	t.Cleanup(m.Stop)
	return m
}
