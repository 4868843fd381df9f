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

// Package disruption runs this provider's manager the way its Deployment runs
// in a management cluster, two replicas electing a leader, and disrupts it in
// the middle of its work: the leader killed (kill -9) during a 300-machine
// scale-up and during MachinePool token rotation, the management API server
// restarted mid-scale; clusterctl moves a cluster to another management
// cluster; upstream's manager and this one replace each other as a rollout of
// one Deployment over the other does. Replicas that die are started again, as
// the kubelet does. Afterwards every KubeadmConfig must have exactly one data
// secret, carrying the token its spec names; every machine that has not joined
// exactly one valid token; a MachinePool's tokens one unbroken rotation chain
// ending at its spec's token; and no init lock may be left behind.
//
// The managers are the real binary, run as the user the generated ClusterRole
// binds, against a real API server with OwnerReferencesPermissionEnforcement
// (internal/test/process); the workload cluster is a second real API server, where
// the tokens live. The package sits beside the controller because its checks
// use the controller's own token derivation and names (a pool's rotations are
// walked ID by ID).
package disruption

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

var (
	mgmt, workload *testenv.Environment
	// managerBinary is this provider's manager; upstreamBinary upstream's
	// v1.14.2 manager, built from the module go.mod pins.
	managerBinary, upstreamBinary string
)

func TestMain(m *testing.M) {
	// The in-process admission webhooks log through controller-runtime.
	ctrl.SetLogger(klog.Background())
	os.Exit(testenv.Run(testenv.RunInput{
		M:                     m,
		Management:            testenv.Options{WithWebhooks: true, WithClusterAPI: true},
		RestartableManagement: true,
		Workload:              true,
		Binaries:              map[string]string{"manager": "./bootstrap/kubeadm/cmd/manager", "upstream": "sigs.k8s.io/cluster-api/bootstrap/kubeadm"},
		Setup: func(s *testenv.Shared) (func(), error) {
			mgmt, workload = s.Management, s.Workload
			managerBinary, upstreamBinary = s.Binaries["manager"], s.Binaries["upstream"]
			return nil, nil
		},
	}))
}

const kubernetesVersion = "v1.36.3"

// TestScaleUpDisrupted: 300 machines of a cluster whose control plane is not
// initialized yet. The leader is killed right after the first control-plane
// machine got its init data (the init lock held); when a third of the
// machines have their data, the management API server stops for 8 seconds
// (longer than the leader's 6-second renew deadline: the leader loses its
// lease and exits, and is started again) and comes back on the same etcd;
// at two thirds the leader is killed again. The replicas left finish.
func TestScaleUpDisrupted(t *testing.T) {
	f := newFixture(t, "scale-up", false)
	d := startDeployment(t, mgmt, f.ns)
	f.createMachines(300)

	f.waitFor(d, "the first control-plane machine's init data", time.Minute, func() bool { return f.dataCount() >= 1 })
	if !f.lockExists() {
		t.Fatal("the init data exists but the init lock does not")
	}
	d.killLeader()
	f.initializeControlPlane()
	f.waitFor(d, "data for a third of the machines", 2*time.Minute, func() bool { return f.dataCount() >= 100 })
	if err := mgmt.RestartAPIServer(8 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("management API server restarted with %d of 300 configs' data in", f.dataCount())
	f.waitFor(d, "data for two thirds of the machines", 2*time.Minute, func() bool { return f.dataCount() >= 200 })
	d.killLeader()
	f.waitFor(d, "data for every machine", 3*time.Minute, func() bool { return f.dataCount() == 300 })
	f.waitFor(d, "the init lock to be released", 30*time.Second, func() bool { return !f.lockExists() })
	d.stop()
	f.expectSettled(d)
}

// TestLeaderKilledDuringTokenRotation: 30 settled MachinePools rotate their
// tokens every half TTL while 30 Machines that never join have theirs
// extended; the leader is killed when the first pool of a rotation round
// has its new token, twice. Every pool then rotates once more under the last
// leader; the pools then start scaling up (no more rotations) and every
// interrupted rotation must be finished: each pool's data carries its spec's
// token.
func TestLeaderKilledDuringTokenRotation(t *testing.T) {
	// Longer than two takeovers (a lease of 8s each), so that a token extended
	// at half its TTL outlives a leader killed just before its next look.
	const ttl = 30 * time.Second
	f := newFixture(t, "kill-rotation", true)
	d := startDeployment(t, mgmt, f.ns, "--bootstrap-token-ttl="+ttl.String(), "--v=2")
	f.createMachines(30)
	f.createPools(30)
	f.waitFor(d, "data for every machine and pool", 2*time.Minute, func() bool { return f.dataCount() == 60 })

	for round := range 2 {
		tokens := f.poolTokens()
		f.waitFor(d, fmt.Sprintf("a pool's token to rotate (round %d)", round+1), 2*ttl, func() bool { return rotated(tokens, f.poolTokens()) > 0 })
		d.killLeader()
	}
	tokens := f.poolTokens()
	f.waitFor(d, "every pool's token to rotate under the new leader", 3*ttl, func() bool { return rotated(tokens, f.poolTokens()) == len(tokens) })
	f.scalePoolsUp()
	f.waitFor(d, "every pool's data to carry its spec's token", ttl, func() bool { return f.poolsConsistent() })
	d.stop()
	f.expectSettled(d)
}

// deployment is the manager's Deployment: two replicas, leader election, a
// replica that exits started again.
type deployment struct {
	t          *testing.T
	env        *testenv.Environment
	kubeconfig []byte
	args       []string
	replicas   []*process.Manager
	// all is every replica started, for their logs.
	all     []*process.Manager
	started int
	// stopped: the Deployment is gone (a rollout replaced it); heal starts
	// nothing.
	stopped bool
	// memoryLimit is the replicas' container memory limit; none when 0.
	memoryLimit int64
}

func startDeployment(t *testing.T, env *testenv.Environment, ns string, extra ...string) *deployment {
	t.Helper()
	d := newDeployment(t, env, ns, extra...)
	d.start()
	d.leader() // the first replica leads before the second starts
	d.start()
	return d
}

// newDeployment is a Deployment of this manager with no replica yet, its
// lease in ns.
func newDeployment(t *testing.T, env *testenv.Environment, ns string, extra ...string) *deployment {
	t.Helper()
	kubeconfig, err := env.ManagerKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	return &deployment{t: t, env: env, kubeconfig: kubeconfig, args: append([]string{
		"--namespace=" + ns,
		"--leader-elect", "--leader-elect-namespace=" + ns,
		// Shorter leases than the default 15s, so that a takeover takes
		// seconds; long enough that a leader starved of CPU by the tests
		// running beside this one still renews.
		"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s",
		"--feature-gates=KubeadmBootstrapFormatIgnition=true",
		// Client limits above the defaults: the runs are about recovery, not throttling.
		"--kube-api-qps=200", "--kube-api-burst=300", "--clustercache-client-qps=200", "--clustercache-client-burst=300",
	}, extra...)}
}

// start starts one more replica. Each serves its webhooks on an idle port of
// its own: the test serves admission (as a Service would route to any replica).
func (d *deployment) start() {
	d.t.Helper()
	d.started++
	r := process.StartManager(d.t, process.ManagerOptions{
		Binary: managerBinary, Name: fmt.Sprintf("replica %d", d.started), Kubeconfig: d.kubeconfig,
		WebhookCertDir: d.env.Webhooks().CertDir, Args: d.args, MemoryLimit: d.memoryLimit,
	})
	d.replicas = append(d.replicas, r)
	d.all = append(d.all, r)
}

// logsAbout is every replica's log lines that mention s, for a failure's
// message.
func (d *deployment) logsAbout(s string) string {
	var out []string
	for _, r := range d.all {
		for _, line := range strings.Split(r.Log(), "\n") {
			if strings.Contains(line, s) {
				out = append(out, r.Name+": "+line)
			}
		}
	}
	return strings.Join(out, "\n")
}

// heal starts a replica for each one that exited, as the kubelet restarts a
// Pod's container.
func (d *deployment) heal() {
	d.t.Helper()
	if d.stopped {
		return
	}
	running := d.replicas[:0]
	for _, r := range d.replicas {
		if r.Exited() {
			d.t.Logf("%s exited; starting another. The end of its log:\n%s", r.Name, lastLines(r.Log(), 3))
			continue
		}
		running = append(running, r)
	}
	gone := len(d.replicas) - len(running)
	d.replicas = running
	for range gone {
		d.start()
	}
}

// lastLines is the last n lines of log.
func lastLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// leader waits for the replica that holds the lease.
func (d *deployment) leader() *process.Manager {
	d.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		d.heal()
		for _, r := range d.replicas {
			if leads, err := r.Leads(); err == nil && leads {
				return r
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.t.Fatal("no replica took the leader-election lease within a minute")
	return nil
}

// killLeader kills the leader with SIGKILL, in the middle of whatever it does,
// and starts its replacement.
func (d *deployment) killLeader() {
	d.t.Helper()
	l := d.leader()
	l.Kill()
	d.t.Logf("killed the leader, %s", l.Name)
	d.heal()
}

// stop ends every replica as a rollout does, so that what the test reads next
// is what they left.
func (d *deployment) stop() {
	d.stopped = true
	start := time.Now()
	for _, r := range d.replicas {
		r.Stop()
	}
	d.t.Logf("replicas stopped in %s", time.Since(start).Round(100*time.Millisecond))
}

// fixture is one test's namespace: a Cluster whose workload API server is
// the shared one, and the objects the test creates in it.
type fixture struct {
	t   *testing.T
	ctx context.Context
	// env is the management cluster the fixture's objects are in.
	env     *testenv.Environment
	ns      string
	cluster *clusterv1.Cluster
	// initData says that m-000 initializes the cluster: its data carries
	// no token, and it has none.
	initData bool
	// stopWebhooks stops the admission the fixture serves in the test.
	stopWebhooks func()
}

const clusterName = "c"

// newFixture creates a namespace with a Cluster (infrastructure ready, its CAs
// made, its control plane initialized if initialized) and serves admission
// for the test; the workload cluster starts without bootstrap tokens.
func newFixture(t *testing.T, ns string, initialized bool) *fixture {
	t.Helper()
	ctx := context.Background()
	stopWebhooks := serveWebhooks(t, mgmt)
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: ns + "-"}}
	if err := mgmt.Client.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, env: mgmt, ns: namespace.Name, initData: !initialized, stopWebhooks: stopWebhooks}

	tokens := &corev1.SecretList{}
	f.must(workload.Client.List(ctx, tokens, client.InNamespace(metav1.NamespaceSystem)))
	for i := range tokens.Items {
		if tokens.Items[i].Type == bootstrapapi.SecretTypeBootstrapToken {
			f.must(client.IgnoreNotFound(workload.Client.Delete(ctx, &tokens.Items[i])))
		}
	}

	f.cluster = &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: f.ns},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443},
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
			},
		},
	}
	f.create(f.cluster)
	certs := secret.NewCertificatesForInitialControlPlane(&upstreambootstrapv1.ClusterConfiguration{})
	f.must(certs.LookupOrGenerate(ctx, mgmt.Client, client.ObjectKeyFromObject(f.cluster), *metav1.NewControllerRef(f.cluster, clusterv1.GroupVersion.WithKind("Cluster"))))
	kubeconfig, err := workload.AdminKubeconfig()
	f.must(err)
	f.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: clusterName + "-kubeconfig", Namespace: f.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": kubeconfig},
	})
	f.setClusterStatus(func(st *clusterv1.ClusterStatus) { st.Initialization.InfrastructureProvisioned = ptr.To(true) })
	if initialized {
		f.initializeControlPlane()
	}
	return f
}

// serveWebhooks serves this provider's admission for env until the test
// ends, or stop is called (to let a manager binary serve them instead).
func serveWebhooks(t *testing.T, env *testenv.Environment) (stop func()) {
	t.Helper()
	gates := feature.NewFeatureGates()
	if err := gates.SetFromMap(map[string]bool{string(feature.KubeadmBootstrapFormatIgnition): true}); err != nil {
		t.Fatal(err)
	}
	return env.StartWebhooks(t, gates)
}

// initializeControlPlane says what a control-plane provider says once the
// first control-plane machine's Node is up.
func (f *fixture) initializeControlPlane() {
	f.t.Helper()
	f.setClusterStatus(func(st *clusterv1.ClusterStatus) {
		st.Initialization.ControlPlaneInitialized = ptr.To(true)
		conditions.Set(f.cluster, metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: "Initialized"})
	})
}

// setClusterStatus changes the Cluster's status as Cluster API's controllers
// do.
func (f *fixture) setClusterStatus(change func(*clusterv1.ClusterStatus)) {
	f.t.Helper()
	if f.cluster == nil {
		f.cluster = &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: clusterName}}
	}
	f.must(f.client().Get(f.ctx, client.ObjectKeyFromObject(f.cluster), f.cluster))
	before := f.cluster.DeepCopy()
	change(&f.cluster.Status)
	f.must(f.client().Status().Patch(f.ctx, f.cluster, client.MergeFrom(before)))
}

// createMachines creates n Machines, each with its KubeadmConfig: the first
// a control-plane machine (it initializes the cluster, or joins it once it
// is initialized), the others workers, cloud-config and Ignition alternating.
func (f *fixture) createMachines(n int) {
	f.t.Helper()
	f.inParallel(n, func(i int) error {
		name := fmt.Sprintf("m-%03d", i)
		labels := map[string]string{clusterv1.ClusterNameLabel: clusterName}
		spec := bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.CloudConfig}
		spec.JoinConfiguration.NodeRegistration.Name = name
		switch {
		case i == 0:
			labels[clusterv1.MachineControlPlaneLabel] = ""
			spec.JoinConfiguration.ControlPlane = &upstreambootstrapv1.JoinControlPlane{}
		case i%2 == 0:
			spec.Format = bootstrapv1.Ignition
		}
		return f.createMachine(name, labels, spec)
	})
}

// createMachine creates a Machine of the cluster with labels and its
// KubeadmConfig with spec.
func (f *fixture) createMachine(name string, labels map[string]string, spec bootstrapv1.KubeadmConfigSpec) error {
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: labels, OwnerReferences: f.clusterOwns()},
		Spec: clusterv1.MachineSpec{
			ClusterName: clusterName, Version: kubernetesVersion,
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachine", Name: name},
		},
	}
	if err := f.client().Create(f.ctx, m); err != nil {
		return err
	}
	return f.client().Create(f.ctx, f.configFor(name, m, "Machine", spec))
}

// createWorker creates a worker Machine and its KubeadmConfig with spec.
func (f *fixture) createWorker(name string, spec bootstrapv1.KubeadmConfigSpec) error {
	return f.createMachine(name, map[string]string{clusterv1.ClusterNameLabel: clusterName}, spec)
}

// createPools creates n MachinePools of one replica whose Node exists (a
// settled pool: its token rotates at half TTL), each with its KubeadmConfig.
func (f *fixture) createPools(n int) {
	f.t.Helper()
	f.inParallel(n, func(i int) error {
		name := fmt.Sprintf("pool-%03d", i)
		pool := &clusterv1.MachinePool{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}, OwnerReferences: f.clusterOwns()},
			Spec: clusterv1.MachinePoolSpec{
				ClusterName: clusterName,
				Replicas:    ptr.To[int32](1),
				Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
					ClusterName: clusterName, Version: kubernetesVersion,
					Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachinePool", Name: name},
				}},
			},
		}
		if err := f.client().Create(f.ctx, pool); err != nil {
			return err
		}
		before := pool.DeepCopy()
		pool.Status.NodeRefs = []corev1.ObjectReference{{Kind: "Node", Name: name + "-0"}}
		if err := f.client().Status().Patch(f.ctx, pool, client.MergeFrom(before)); err != nil {
			return err
		}
		format := bootstrapv1.CloudConfig
		if i%2 == 1 {
			format = bootstrapv1.Ignition
		}
		return f.client().Create(f.ctx, f.configFor(name, pool, "MachinePool", bootstrapv1.KubeadmConfigSpec{Format: format}))
	})
}

// scalePoolsUp gives every pool a second replica without its Node yet: a
// pool with instances joining keeps its token (extends it) and rotates no
// more.
func (f *fixture) scalePoolsUp() {
	f.t.Helper()
	pools := &clusterv1.MachinePoolList{}
	f.must(f.client().List(f.ctx, pools, client.InNamespace(f.ns)))
	for _, pool := range pools.Items {
		f.setPoolReplicas(pool.Name, 2)
	}
}

// poolsConsistent reports whether every pool's data secret names the token
// its config's spec names.
func (f *fixture) poolsConsistent() bool {
	f.t.Helper()
	for _, c := range f.configs() {
		if !strings.HasPrefix(c.Name, "pool-") {
			continue
		}
		sec := &corev1.Secret{}
		if err := f.client().Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: c.Status.DataSecretName}, sec); err != nil {
			return false
		}
		if sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation] != tokenID(c.Spec.JoinConfiguration.Discovery.BootstrapToken.Token) {
			return false
		}
	}
	return true
}

// clusterOwns is the owner reference to the Cluster that Cluster API's
// controllers put on its Machines and MachinePools (clusterctl move follows
// it).
func (f *fixture) clusterOwns() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: f.cluster.Name, UID: f.cluster.UID}}
}

// configFor is the KubeadmConfig named name that owner's kind controls.
func (f *fixture) configFor(name string, owner client.Object, kind string, spec bootstrapv1.KubeadmConfigSpec) *bootstrapv1.KubeadmConfig {
	return &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: f.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: name, UID: owner.GetUID(), Controller: ptr.To(true)}},
		},
		Spec: spec,
	}
}

func (f *fixture) configs() []bootstrapv1.KubeadmConfig {
	f.t.Helper()
	list := &bootstrapv1.KubeadmConfigList{}
	f.must(f.client().List(f.ctx, list, client.InNamespace(f.ns)))
	return list.Items
}

// dataCount is how many configs say their data secret exists; 0 while the
// API server cannot be read.
func (f *fixture) dataCount() int {
	list := &bootstrapv1.KubeadmConfigList{}
	if err := f.client().List(f.ctx, list, client.InNamespace(f.ns)); err != nil {
		return 0
	}
	n := 0
	for _, c := range list.Items {
		if ptr.Deref(c.Status.Initialization.DataSecretCreated, false) {
			n++
		}
	}
	return n
}

func (f *fixture) lockExists() bool {
	f.t.Helper()
	err := f.client().Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: bootstrapv1.InitLockName(clusterName)}, &corev1.ConfigMap{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return err == nil
}

// poolTokens is each pool config's spec token ID.
func (f *fixture) poolTokens() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	for _, c := range f.configs() {
		if strings.HasPrefix(c.Name, "pool-") {
			out[c.Name] = c.Spec.JoinConfiguration.Discovery.BootstrapToken.Token
		}
	}
	return out
}

// rotated counts the pools whose token is no longer the one in before.
func rotated(before, now map[string]string) int {
	n := 0
	for name, tok := range before {
		if now[name] != tok {
			n++
		}
	}
	return n
}

// waitFor polls cond while keeping the Deployment's replicas running.
func (f *fixture) waitFor(d *deployment, what string, timeout time.Duration, cond func() bool) {
	f.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			f.t.Fatalf("no %s after %s (%d configs have data)\nlast replica's log:\n%s", what, timeout, f.dataCount(), d.replicas[len(d.replicas)-1].LogTail())
		}
		d.heal()
		time.Sleep(100 * time.Millisecond)
	}
	f.t.Logf("%s after %s", what, time.Since(start).Round(100*time.Millisecond))
}

// expectSettled checks what the managers left: each config has one data
// secret, rendered with the token its spec names; that token exists and is
// valid; a Machine's config has no other token; a pool's tokens form one
// chain of rotations from its first token to the spec's, and none was made
// beyond it (an unfinished rotation); every token in the workload cluster is
// a config's; no init lock is left.
func (f *fixture) expectSettled(d *deployment) {
	f.t.Helper()
	if f.lockExists() {
		f.t.Error("the init lock is left behind")
	}
	dataSecrets := f.dataSecrets()
	tokensByOwner := map[string][]corev1.Secret{}
	tokens := &corev1.SecretList{}
	f.must(workload.Client.List(f.ctx, tokens, client.InNamespace(metav1.NamespaceSystem)))
	for _, s := range tokens.Items {
		if s.Type == bootstrapapi.SecretTypeBootstrapToken {
			uid := s.Labels[bootstrapv1.BootstrapTokenConfigUIDLabel]
			tokensByOwner[uid] = append(tokensByOwner[uid], s)
		}
	}

	configs := f.configs()
	for _, c := range configs {
		owned := tokensByOwner[string(c.UID)]
		delete(tokensByOwner, string(c.UID))
		if c.Name == "m-000" && f.initData {
			if len(owned) != 0 {
				f.t.Errorf("%s initialized the cluster, but has %d tokens", c.Name, len(owned))
			}
			if n := len(dataSecrets[c.Name]); n != 1 {
				f.t.Errorf("%s: %d data secrets, want 1", c.Name, n)
			}
			continue
		}
		spec, data, ok := f.expectData(c, dataSecrets[c.Name])
		if !ok {
			continue
		}
		if got := data.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]; got != spec.ID {
			f.t.Errorf("%s: the data secret names token %q, the spec %q", c.Name, got, spec.ID)
		}
		if !f.expectTokens(c, spec, owned) {
			f.t.Logf("what the replicas logged about %s:\n%s", c.Name, d.logsAbout(c.Name))
		}
	}
	for uid, toks := range tokensByOwner {
		for _, s := range toks {
			f.t.Errorf("token %s belongs to no config (owner UID label %q)", s.Name, uid)
		}
	}
	f.t.Logf("%d configs checked", len(configs))
}

// dataSecrets is the namespace's Secrets by the name of the KubeadmConfig
// that owns them.
func (f *fixture) dataSecrets() map[string][]corev1.Secret {
	f.t.Helper()
	out := map[string][]corev1.Secret{}
	secrets := &corev1.SecretList{}
	f.must(f.client().List(f.ctx, secrets, client.InNamespace(f.ns)))
	for _, s := range secrets.Items {
		for _, ref := range s.OwnerReferences {
			if ref.Kind == "KubeadmConfig" {
				out[ref.Name] = append(out[ref.Name], s)
			}
		}
	}
	return out
}

// expectData checks that a joining config has exactly one data secret, the
// one its status names, carrying the token its spec names, and that token
// exists and is valid. It returns the token and the data secret.
func (f *fixture) expectData(c bootstrapv1.KubeadmConfig, secrets []corev1.Secret) (bootstraptoken.Token, *corev1.Secret, bool) {
	f.t.Helper()
	if n := len(secrets); n != 1 {
		f.t.Errorf("%s: %d data secrets, want 1", c.Name, n)
		return bootstraptoken.Token{}, nil, false
	}
	data := &secrets[0]
	if data.Name != c.Status.DataSecretName {
		f.t.Errorf("%s: data secret %s, status names %q", c.Name, data.Name, c.Status.DataSecretName)
	}
	spec, err := bootstraptoken.Parse(c.Spec.JoinConfiguration.Discovery.BootstrapToken.Token)
	if err != nil {
		f.t.Errorf("%s: no token in the spec: %v", c.Name, err)
		return bootstraptoken.Token{}, nil, false
	}
	if _, kubeadmConfig, err := consumers.KubeadmConfigIn(string(c.Spec.Format), data.Data["value"]); err != nil {
		f.t.Errorf("%s: %v", c.Name, err)
	} else if !strings.Contains(string(kubeadmConfig), "token: "+spec.Value()) {
		f.t.Errorf("%s: the data does not carry the spec's token %s", c.Name, spec.ID)
	}
	f.expectValid(c.Name, spec)
	return spec, data, true
}

// expectTokens checks the tokens labelled with c's UID against the spec's.
func (f *fixture) expectTokens(c bootstrapv1.KubeadmConfig, spec bootstraptoken.Token, owned []corev1.Secret) (ok bool) {
	f.t.Helper()
	failed := f.t.Failed()
	defer func() { ok = f.t.Failed() == failed }()
	byID := map[string]corev1.Secret{}
	for _, s := range owned {
		byID[string(s.Data[bootstrapapi.BootstrapTokenIDKey])] = s
	}
	if _, found := byID[spec.ID]; !found {
		f.t.Errorf("%s: its token %s is not labelled as its own", c.Name, spec.ID)
		return ok
	}
	if !strings.HasPrefix(c.Name, "pool-") {
		if len(owned) != 1 {
			f.t.Errorf("%s: %d tokens, want 1", c.Name, len(owned))
		}
		return ok
	}
	// Walk the rotations from the first token to the spec's.
	chain, previous := 0, ""
	for previous != spec.ID {
		next := ""
		for id := range byID {
			if bootstraptoken.Derived(c.UID, previous, id) {
				next = id
			}
		}
		if next == "" {
			f.t.Errorf("%s: the rotations from its first token do not reach the spec's %s (stuck after %q)", c.Name, spec.ID, previous)
			return ok
		}
		chain++
		previous = next
	}
	if chain != len(owned) {
		f.t.Errorf("%s: %d tokens, of which %d are its rotations up to the spec's token", c.Name, len(owned), chain)
	}
	if chain < 2 {
		f.t.Errorf("%s: the pool's token never rotated", c.Name)
	}
	return ok
}

func (f *fixture) client() client.Client { return f.env.Client }

func (f *fixture) create(o client.Object) {
	f.t.Helper()
	f.must(f.client().Create(f.ctx, o))
}

// inParallel runs do(i) for every i in [0, n), eight at a time, as Cluster
// API's controllers create many objects at once, and fails on any error.
func (f *fixture) inParallel(n int, do func(int) error) {
	f.t.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error { return do(i) })
	}
	f.must(g.Wait())
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}
