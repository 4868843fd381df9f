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

// Package scale runs this provider's manager and upstream Cluster API
// v1.14.2's kubeadm bootstrap manager side by side on one real API server
// (envtest) and measures what it costs each of them to give N KubeadmConfigs
// their data: wall time, API requests and bytes written per config, tokens,
// heap, goroutines and CPU. `make bench-scale` runs it; it is not part of
// `make test`.
package scale

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/requestcount"

	corev1 "k8s.io/api/core/v1"
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
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

var (
	mgmt, workload *testenv.Environment
	binaries       map[string]string
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The in-process admission webhooks log through controller-runtime.
	ctrl.SetLogger(klog.Background())
	if flag.Lookup("test.bench").Value.String() == "" {
		// Only the benchmark needs the binaries and API servers: `go test ./...` stays fast.
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(testenv.RunInput{
		M:          m,
		Management: testenv.Options{WithWebhooks: true, WithClusterAPI: true},
		Workload:   true,
		// The real binaries: this provider's, and upstream's manager built
		// from the module version go.mod pins.
		Binaries: map[string]string{"ours": "./bootstrap/kubeadm/cmd/manager", "upstream": "sigs.k8s.io/cluster-api/bootstrap/kubeadm"},
		Setup: func(s *testenv.Shared) (func(), error) {
			mgmt, workload, binaries = s.Management, s.Workload, s.Binaries
			return func() {
				if workloads != nil {
					workloads.shutdown()
				}
			}, nil
		},
	}))
}

// serveWebhooks serves this provider's admission for every object of a
// benchmark, whichever manager is measured.
func serveWebhooks(b *testing.B) {
	gates := feature.NewFeatureGates()
	if err := gates.SetFromMap(map[string]bool{string(feature.KubeadmBootstrapFormatIgnition): true}); err != nil {
		b.Fatal(err)
	}
	mgmt.StartWebhooks(b, gates)
}

// result is one implementation's run at one size.
type result struct {
	n        int
	wall     time.Duration
	counts   requestcount.Counts
	tokens   int // bootstrap tokens that exist in the workload cluster afterwards
	creates  int // token create requests (a retry that finds its token counts here only)
	heapMB   float64
	routines float64
	cpu      float64
}

func (r result) perConfig(v float64) float64 { return v / float64(r.n) }

func sizes(b *testing.B) []int {
	spec := os.Getenv("SCALE_SIZES")
	if spec == "" {
		spec = "100,500,1000"
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			b.Fatalf("SCALE_SIZES: %q is not a size of at least 2", f)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkScale: for each size N, a Cluster with one control-plane machine
// joining and N-1 workers (cloud-config and ignition alternating), created
// while the Cluster is paused; the clock runs from unpausing to every config
// having its data. Each implementation gets identical objects in its own
// namespace, watched only by its manager (--namespace), which reaches the
// management and workload API servers through counting proxies.
func BenchmarkScale(b *testing.B) {
	serveWebhooks(b)

	results := map[string][]result{}
	for _, n := range sizes(b) {
		for _, impl := range []string{"ours", "upstream"} {
			b.Run(fmt.Sprintf("n=%d/impl=%s", n, impl), func(b *testing.B) {
				for range b.N {
					r := run(b, impl, n)
					results[impl] = append(results[impl], r)
					total, writes := r.counts.Total()
					b.ReportMetric(r.perConfig(float64(total)), "requests/config")
					b.ReportMetric(r.perConfig(float64(writes)), "writes/config")
					b.ReportMetric(r.perConfig(float64(r.counts.BytesWritten)), "bytes-written/config")
					b.ReportMetric(r.perConfig(float64(r.tokens)), "tokens/config")
					b.ReportMetric(r.perConfig(float64(r.creates)), "token-creates/config")
					b.ReportMetric(r.perConfig(r.wall.Seconds())*1000, "ms/config")
					b.ReportMetric(r.heapMB, "heap-MB")
					b.ReportMetric(r.routines, "goroutines")
					b.ReportMetric(r.cpu, "cpu-s")
					var rows []string
					for k, v := range r.counts.Requests {
						rows = append(rows, fmt.Sprintf("  %-42s %8.3f", k, r.perConfig(float64(v))))
					}
					sort.Strings(rows)
					b.Logf("%s, n=%d: all ready after %s; management API requests per config:\n%s", impl, n, r.wall.Round(time.Millisecond), strings.Join(rows, "\n"))
				}
			})
		}
	}
	for impl, rs := range results {
		if len(rs) < 2 {
			continue
		}
		first, last := rs[0], rs[len(rs)-1]
		ft, fw := first.counts.Total()
		lt, lw := last.counts.Total()
		b.Logf("%s: per-config cost at n=%d / at n=%d: time %.2f, requests %.2f, writes %.2f, bytes written %.2f, cpu %.2f; heap at the end %.2f",
			impl, last.n, first.n,
			last.perConfig(last.wall.Seconds())/first.perConfig(first.wall.Seconds()),
			last.perConfig(float64(lt))/first.perConfig(float64(ft)),
			last.perConfig(float64(lw))/first.perConfig(float64(fw)),
			last.perConfig(float64(last.counts.BytesWritten))/first.perConfig(float64(first.counts.BytesWritten)),
			last.perConfig(last.cpu)/first.perConfig(first.cpu), last.heapMB/first.heapMB)
	}
}

// run measures one implementation at one size.
func run(b *testing.B, impl string, n int) result {
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := mgmt.Client
	ns := fmt.Sprintf("%s-%d", impl, n)
	must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	mgmtCounter, workloadCounter := requestcount.New(), requestcount.New()
	mgmtKubeconfig, err := mgmtCounter.Proxy(ctx, mgmt.Config)
	must(b, err)
	workloadKubeconfig, err := workloadCounter.Proxy(ctx, workload.Config)
	must(b, err)

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: ns},
		Spec: clusterv1.ClusterSpec{
			Paused:               ptr.To(true),
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443},
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
			},
		},
	}
	must(b, c.Create(ctx, cluster))
	// The cluster's CAs exist, as a control-plane provider makes them first.
	certs := secret.NewCertificatesForInitialControlPlane(&upstreambootstrapv1.ClusterConfiguration{})
	must(b, certs.LookupOrGenerate(ctx, c, client.ObjectKeyFromObject(cluster), *metav1.NewControllerRef(cluster, clusterv1.GroupVersion.WithKind("Cluster"))))
	must(b, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "scale-kubeconfig", Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "scale"}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": workloadKubeconfig},
	}))
	before := cluster.DeepCopy()
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	cluster.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	conditions.Set(cluster, metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: "Scale"})
	must(b, c.Status().Patch(ctx, cluster, client.MergeFrom(before)))

	m := startManager(b, impl, ns, mgmtKubeconfig)
	defer m.stop(b)
	createMachines(b, ns, n)
	// Let the manager settle (its cluster cache connects, the paused configs
	// are seen) so that the clock measures bootstrapping, not start-up.
	time.Sleep(3 * time.Second)
	tokensBefore := countTokens(b)

	// Go: unpause and wait until every config has its data.
	start := mgmtCounter.Snapshot()
	startWorkload := workloadCounter.Snapshot()
	startCPU := m.metric(b, "process_cpu_seconds_total")
	before = cluster.DeepCopy()
	cluster.Spec.Paused = ptr.To(false)
	b.StartTimer()
	t0 := time.Now()
	must(b, c.Patch(ctx, cluster, client.MergeFrom(before)))
	deadline := t0.Add(15 * time.Minute)
	for {
		list := &bootstrapv1.KubeadmConfigList{}
		must(b, c.List(ctx, list, client.InNamespace(ns)))
		ready := 0
		for _, cfg := range list.Items {
			if ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) {
				ready++
			}
		}
		if ready == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d of %d configs ready after 15 minutes\n%s", impl, ready, n, m.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	wall := time.Since(t0)
	b.StopTimer()
	// What follows from the last writes (watch events of the status patches) lands within moments.
	time.Sleep(3 * time.Second)
	r := result{
		n: n, wall: wall,
		counts:   mgmtCounter.Snapshot().Since(start),
		tokens:   countTokens(b) - tokensBefore,
		creates:  workloadCounter.Snapshot().Since(startWorkload).Requests["create secrets"],
		heapMB:   m.metric(b, "go_memstats_heap_alloc_bytes") / (1 << 20),
		routines: m.metric(b, "go_goroutines"),
		cpu:      m.metric(b, "process_cpu_seconds_total") - startCPU,
	}
	return r
}

// countTokens counts the bootstrap token Secrets in the workload cluster.
func countTokens(b *testing.B) int {
	list := &corev1.SecretList{}
	must(b, workload.Client.List(context.Background(), list, client.InNamespace(metav1.NamespaceSystem)))
	n := 0
	for _, s := range list.Items {
		if s.Type == bootstrapapi.SecretTypeBootstrapToken {
			n++
		}
	}
	return n
}

// inParallel runs do(i) for every i in [0, n), width at a time, as Cluster
// API's controllers create many objects at once, and fails on any error.
func inParallel(b *testing.B, width, n int, do func(int) error) {
	b.Helper()
	var g errgroup.Group
	g.SetLimit(width)
	for i := range n {
		g.Go(func() error { return do(i) })
	}
	must(b, g.Wait())
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// createMachines creates one control-plane Machine and n-1 workers, each
// with its KubeadmConfig owned by it.
func createMachines(b *testing.B, ns string, n int) {
	inParallel(b, 8, n, func(i int) error { return createMachine(context.Background(), ns, i) })
}

func createMachine(ctx context.Context, ns string, i int) error {
	name := fmt.Sprintf("m-%04d", i)
	labels := map[string]string{clusterv1.ClusterNameLabel: "scale"}
	spec := bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.CloudConfig}
	spec.JoinConfiguration.NodeRegistration.Name = name
	switch {
	case i == 0:
		labels[clusterv1.MachineControlPlaneLabel] = ""
		spec.JoinConfiguration.ControlPlane = &upstreambootstrapv1.JoinControlPlane{}
	case i%2 == 0:
		spec.Format = bootstrapv1.Ignition
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: "scale", Version: "v1.36.3",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "ScaleMachine", Name: name},
		},
	}
	if err := mgmt.Client.Create(ctx, m); err != nil {
		return err
	}
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "scale"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: m.UID, Controller: ptr.To(true)}},
		},
		Spec: spec,
	}
	return mgmt.Client.Create(ctx, cfg)
}

// startManager runs one implementation's binary watching namespace ns.
func startManager(b *testing.B, impl, ns string, kubeconfig []byte, extra ...string) *manager {
	args := append([]string{"--namespace=" + ns, "--feature-gates=KubeadmBootstrapFormatIgnition=true"}, extra...)
	var profiler string
	for _, a := range extra {
		if v, ok := strings.CutPrefix(a, "--profiler-address="); ok {
			profiler = v
		}
	}
	if impl == "upstream" {
		args = append(args, "--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields")
	}
	// Flags for both managers, e.g. to lift the workload-cluster client limit
	// (--clustercache-client-qps, 20 by default in both) that otherwise caps
	// both at 20 token creates a second.
	args = append(args, strings.Fields(os.Getenv("SCALE_FLAGS"))...)
	return &manager{Manager: process.StartManager(b, process.ManagerOptions{
		Binary: binaries[impl], Name: impl, Kubeconfig: kubeconfig,
		WebhookCertDir: mgmt.Webhooks().CertDir, Args: args,
	}), profiler: profiler}
}

// manager is a manager binary running for one measurement.
type manager struct {
	*process.Manager
	profiler string // pprof's address, when it serves it
}

func (m *manager) stop(*testing.B) { m.Stop() }

func (m *manager) logTail() string { return m.LogTail() }

func (m *manager) metric(b *testing.B, name string) float64 {
	all, err := m.Scrape()
	must(b, err)
	v, ok := all[name]
	if !ok {
		b.Fatalf("the manager reports no %s", name)
	}
	return v
}
