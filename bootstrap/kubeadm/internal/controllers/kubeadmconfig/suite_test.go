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
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/manager"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// The package's tests share a management API server (Cluster API's and this
// provider's CRDs, this provider's webhooks registered) and a workload API
// server that bootstrap tokens are created in. Each test starts the real
// manager (manager.New, the same wiring and flags as the binary) against
// them, in a namespace of its own.
var (
	mgmt     *testenv.Environment
	workload *testenv.Environment
	// workloadKubeconfig lets the cluster cache reach the workload API server.
	workloadKubeconfig []byte
	// logs collects everything every manager logs, up to the highest verbosity it accepts.
	logs syncBuffer
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) write(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(line)
	s.b.WriteByte('\n')
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMain(m *testing.M) {
	// The highest verbosity the manager accepts.
	ctrl.SetLogger(funcr.New(func(prefix, args string) { logs.write(prefix + " " + args) }, funcr.Options{Verbosity: 7}))
	os.Exit(testenv.Run(testenv.RunInput{
		M:          m,
		Management: testenv.Options{WithWebhooks: true, WithClusterAPI: true},
		Workload:   true,
		Setup: func(s *testenv.Shared) (func(), error) {
			mgmt, workload = s.Management, s.Workload
			var err error
			workloadKubeconfig, err = workload.AdminKubeconfig()
			return nil, err
		},
	}))
}

// startManager runs the provider's manager, built from flags exactly as the
// binary builds it, until the test ends (or stop is called).
func startManager(t *testing.T, flags ...string) (stop func()) {
	t.Helper()
	hooks := mgmt.Webhooks()
	args := append([]string{
		fmt.Sprintf("--webhook-port=%d", hooks.Port),
		"--webhook-cert-dir=" + hooks.CertDir,
		"--health-addr=0",
		"--diagnostics-address=0",
		"--insecure-diagnostics",
		"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true",
	}, flags...)
	opts, err := manager.ParseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	opts.ManyPerProcess = true
	// Informer names are unique per process; each manager here is the
	// process's only live one.
	toolscache.ResetInformerNamesForTesting()
	ctx, cancel := context.WithCancel(context.Background())
	// The manager has the release's rights only (not the tests' admin).
	restricted, err := mgmt.ManagerConfig()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	mgr, err := manager.New(ctx, opts, restricted)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				// A runnable that outlives the grace period is still running:
				// its stack says which one it is.
				_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	if err := testenv.WaitForTLS(fmt.Sprintf("%s:%d", hooks.Host, hooks.Port), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return stop
}

// fixture is one Cluster in a namespace of its own, with a kubeconfig Secret
// that reaches the workload API server.
type fixture struct {
	t       testing.TB
	ctx     context.Context
	ns      string
	cluster *clusterv1.Cluster
}

const kubernetesVersion = "v1.36.3"

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), ns: "t-" + rand.String(6)}
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})
	f.cluster = &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c-" + rand.String(5), Namespace: f.ns},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443},
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:          clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
				Services:      clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
				ServiceDomain: "cluster.local",
			},
		},
	}
	f.create(f.cluster)
	f.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: f.cluster.Name + "-kubeconfig", Namespace: f.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: f.cluster.Name}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": workloadKubeconfig},
	})
	return f
}

// newRunningCluster is a fixture whose control plane is up: the cluster's
// certificates exist, its infrastructure is provisioned and its control plane
// initialized, so machines join right away.
func newRunningCluster(t testing.TB) *fixture {
	t.Helper()
	f := newFixture(t)
	f.clusterCertificates()
	f.setClusterStatus(true, true)
	return f
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := mgmt.Client.Create(f.ctx, obj); err != nil {
		f.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// setClusterStatus sets what the Cluster's infrastructure and control-plane
// providers would.
func (f *fixture) setClusterStatus(infrastructure, controlPlaneInitialized bool) {
	f.t.Helper()
	c := &clusterv1.Cluster{}
	if err := mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(f.cluster), c); err != nil {
		f.t.Fatal(err)
	}
	before := c.DeepCopy()
	c.Status.Initialization.InfrastructureProvisioned = ptr.To(infrastructure)
	c.Status.Initialization.ControlPlaneInitialized = ptr.To(controlPlaneInitialized)
	status := metav1.ConditionFalse
	if controlPlaneInitialized {
		status = metav1.ConditionTrue
	}
	conditions.Set(c, metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: status, Reason: "Test"})
	if err := mgmt.Client.Status().Patch(f.ctx, c, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
	f.cluster = c
}

// machine creates a Machine and its KubeadmConfig, owned by it as Cluster
// API's Machine controller would own it.
func (f *fixture) machine(name string, controlPlane bool, spec bootstrapv1.KubeadmConfigSpec) (*clusterv1.Machine, *bootstrapv1.KubeadmConfig) {
	f.t.Helper()
	m := f.newMachine(name, controlPlane)
	f.create(m)
	return m, f.config(name, m, spec)
}

// newMachine is a Machine of the fixture's cluster whose config is name,
// not yet created.
func (f *fixture) newMachine(name string, controlPlane bool) *clusterv1.Machine {
	labels := map[string]string{clusterv1.ClusterNameLabel: f.cluster.Name}
	if controlPlane {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: f.cluster.Name,
			Version:     kubernetesVersion,
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name,
			}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachine", Name: name},
		},
	}
	return m
}

func (f *fixture) config(name string, owner client.Object, spec bootstrapv1.KubeadmConfigSpec) *bootstrapv1.KubeadmConfig {
	f.t.Helper()
	kind := "Machine"
	if _, ok := owner.(*clusterv1.MachinePool); ok {
		kind = "MachinePool"
	}
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: f.ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: f.cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true),
			}},
		},
		Spec: spec,
	}
	f.create(cfg)
	return cfg
}

func (f *fixture) get(obj client.Object) {
	f.t.Helper()
	if err := mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		f.t.Fatal(err)
	}
}

// setNodeRef sets the Machine's nodeRef as Cluster API does once its Node
// exists (or, empty, clears it as a move or a restore does).
func (f *fixture) setNodeRef(m *clusterv1.Machine, node string) {
	f.t.Helper()
	f.get(m)
	before := m.DeepCopy()
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	if err := mgmt.Client.Status().Patch(f.ctx, m, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

// waitFor polls until cond holds (a few tens of seconds at most).
func (f *fixture) waitFor(what string, timeout time.Duration, cond func() bool) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		f.t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// waitForData waits until cfg has its data secret and returns the secret.
func (f *fixture) waitForData(cfg *bootstrapv1.KubeadmConfig) *corev1.Secret {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		f.get(cfg)
		return ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false), nil
	})
	if err != nil {
		f.t.Fatalf("%s got no data secret: %s", cfg.Name, dataAvailableReason(cfg))
	}
	return f.dataSecret(cfg)
}

// dataSecret reads the data secret the config's status names.
func (f *fixture) dataSecret(cfg *bootstrapv1.KubeadmConfig) *corev1.Secret {
	f.t.Helper()
	s := &corev1.Secret{}
	if err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: cfg.Status.DataSecretName}, s); err != nil {
		f.t.Fatalf("%s: status names data secret %q, which cannot be read: %v", cfg.Name, cfg.Status.DataSecretName, err)
	}
	return s
}

// waitForReason waits until cfg's condition has reason.
func (f *fixture) waitForReason(cfg *bootstrapv1.KubeadmConfig, conditionType, reason string) *metav1.Condition {
	f.t.Helper()
	var c *metav1.Condition
	f.waitFor(fmt.Sprintf("%s of %s to have reason %s", conditionType, cfg.Name, reason), 60*time.Second, func() bool {
		f.get(cfg)
		c = conditions.Get(cfg, conditionType)
		return c != nil && c.Reason == reason
	})
	return c
}

// tokensOf lists the bootstrap token Secrets in the workload cluster made for cfg.
func tokensOf(t testing.TB, cfg *bootstrapv1.KubeadmConfig) []corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := workload.Client.List(context.Background(), list, client.InNamespace(metav1.NamespaceSystem),
		client.MatchingLabels{bootstrapv1.BootstrapTokenConfigUIDLabel: string(cfg.UID)}); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Type != bootstrapapi.SecretTypeBootstrapToken {
			t.Errorf("%s is labelled as a token but has type %s", s.Name, s.Type)
		}
	}
	return list.Items
}

func tokenSecret(t testing.TB, id string) (*corev1.Secret, bool) {
	t.Helper()
	s := &corev1.Secret{}
	err := workload.Client.Get(context.Background(), client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "bootstrap-token-" + id}, s)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, true
}

func dataAvailableReason(cfg *bootstrapv1.KubeadmConfig) string {
	if c := conditions.Get(cfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition); c != nil {
		return c.Reason + ": " + c.Message
	}
	var all []string
	for _, c := range cfg.Status.Conditions {
		all = append(all, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return "no DataSecretAvailable condition; " + strings.Join(all, "; ")
}

// clusterCertificates creates the cluster's CAs as a control-plane provider
// does before its first machine.
func (f *fixture) clusterCertificates() {
	f.t.Helper()
	certs := secret.NewCertificatesForInitialControlPlane(&upstreambootstrapv1.ClusterConfiguration{})
	owner := *metav1.NewControllerRef(f.cluster, clusterv1.GroupVersion.WithKind("Cluster"))
	if err := certs.LookupOrGenerate(f.ctx, mgmt.Client, client.ObjectKeyFromObject(f.cluster), owner); err != nil {
		f.t.Fatal(err)
	}
}

func containsAny(haystack string, needles ...string) string {
	for _, n := range needles {
		if n != "" && strings.Contains(haystack, n) {
			return n
		}
	}
	return ""
}
