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

package scale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/requestcount"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// workloads serves the workload clusters of the many-cluster runs; started
// by the first run that needs it.
var (
	workloads     *workloadServers
	workloadsOnce sync.Once
	workloadsErr  error
)

func workloadServersFor(b *testing.B) *workloadServers {
	workloadsOnce.Do(func() { workloads, workloadsErr = newWorkloadServers(context.Background()) })
	must(b, workloadsErr)
	return workloads
}

// shape is C workload clusters of M machines each.
type shape struct{ clusters, machines int }

func (s shape) String() string { return fmt.Sprintf("%dx%d", s.clusters, s.machines) }
func (s shape) configs() int   { return s.clusters * s.machines }

func shapes(b *testing.B) []shape {
	spec := os.Getenv("SCALE_SHAPES")
	if spec == "" {
		spec = "1x1000,100x10,1000x1,1000x3"
	}
	var out []shape
	for _, f := range strings.Split(spec, ",") {
		c, m, ok := strings.Cut(strings.TrimSpace(f), "x")
		nc, err1 := strconv.Atoi(c)
		nm, err2 := strconv.Atoi(m)
		if !ok || err1 != nil || err2 != nil || nc < 1 || nm < 1 || nc > int(workloadMaxPort-workloadMinPort)-10 {
			b.Fatalf("SCALE_SHAPES: %q is not CLUSTERSxMACHINES", f)
		}
		out = append(out, shape{nc, nm})
	}
	return out
}

func impls() []string {
	if v := os.Getenv("SCALE_IMPLS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"ours", "upstream"}
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return d
}

// BenchmarkScaleClusters: for each shape CxM, C Clusters, each with one
// control-plane Machine that initializes it and M-1 workers (cloud-config
// and Ignition alternating), each Machine with its KubeadmConfig; every
// workload cluster is a listener of Cluster API's in-memory API server in
// this process. The Clusters are created paused with their infrastructure
// provisioned; the clock starts when all are unpaused at once (the burst):
// every initializing config is ready then. When one has its data, this
// harness marks its Cluster's control plane initialized, as a control-plane
// provider does once the first node is up, and that Cluster's workers are
// ready from then. Latency per config runs from its readiness to this
// harness seeing dataSecretCreated (a watch). Then one more Cluster (an
// initializing machine and a worker) arrives among the C served ones.
func BenchmarkScaleClusters(b *testing.B) {
	serveWebhooks(b)
	results := map[string][]clustersResult{}
	for _, s := range shapes(b) {
		for _, impl := range impls() {
			b.Run(fmt.Sprintf("shape=%s/impl=%s", s, impl), func(b *testing.B) {
				for range b.N {
					r := runClusters(b, impl, s)
					r.report(b)
					results[impl] = append(results[impl], r)
				}
			})
		}
	}
	for impl, rs := range results {
		compare(b, impl, rs)
	}
}

// compare logs what the shapes of one implementation say together: the cost
// of a workload cluster (two shapes with as many configs, more clusters in
// one), and how per-config cost grows with the configs of one cluster.
func compare(b *testing.B, impl string, rs []clustersResult) {
	for _, x := range rs {
		for _, y := range rs {
			if x.shape.configs() == y.shape.configs() && y.shape.clusters > x.shape.clusters {
				extra := float64(y.shape.clusters - x.shape.clusters)
				b.Logf("%s: per workload cluster (%s against %s): heap %.1f KiB, %.2f goroutines, %.2f connections, %.3f management requests, time to all ready %+.1f ms",
					impl, y.shape, x.shape, (y.heapMB-x.heapMB)*1024/extra, (y.routines-x.routines)/extra, float64(y.conns-x.conns)/extra,
					(float64(y.total())-float64(x.total()))/extra,
					ms(y.wall-x.wall)/extra)
			}
			if x.shape.clusters == 1 && y.shape.clusters == 1 && y.shape.machines > x.shape.machines {
				per := func(r clustersResult, v float64) float64 { return v / float64(r.configs()) }
				_, xw := x.counts.Total()
				_, yw := y.counts.Total()
				b.Logf("%s: per-config cost at %s / at %s (1.00 = linear): time %.2f, requests %.2f, writes %.2f, cpu %.2f",
					impl, y.shape, x.shape,
					per(y, y.wall.Seconds())/per(x, x.wall.Seconds()),
					per(y, float64(y.total()))/per(x, float64(x.total())),
					per(y, float64(yw))/per(x, float64(xw)),
					per(y, y.cpu)/per(x, x.cpu))
			}
		}
	}
}

func (r clustersResult) total() int { t, _ := r.counts.Total(); return t }

// fleet is one implementation's Clusters of one run, in a namespace its
// manager alone watches.
type fleet struct {
	impl, ns string
	names    []string // Cluster names, also their workload clusters' listener names
	ports    map[string]int32

	mgmtCounter *requestcount.Counter
	kubeconfig  []byte // reaches the management API server through mgmtCounter
	mgr         *manager
	watch       *readiness
}

func newFleet(b *testing.B, ctx context.Context, impl, ns string, clusters int) *fleet {
	f := &fleet{impl: impl, ns: ns, ports: map[string]int32{}, mgmtCounter: requestcount.New()}
	must(b, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	var err error
	f.kubeconfig, err = f.mgmtCounter.Proxy(ctx, mgmt.Config)
	must(b, err)
	for i := range clusters {
		f.names = append(f.names, fmt.Sprintf("w-%04d", i))
	}
	w := workloadServersFor(b)
	var mu sync.Mutex
	inParallel(b, 8, len(f.names), func(i int) error {
		port, err := w.ensure(ctx, f.names[i])
		mu.Lock()
		f.ports[f.names[i]] = port
		mu.Unlock()
		return err
	})
	_, err = w.removeTokens(ctx, f.names)
	must(b, err)
	return f
}

// addCluster creates a Cluster with provisioned infrastructure, its
// certificates and its kubeconfig Secret; paused, or running with its control
// plane up (initialized).
func (f *fleet) addCluster(ctx context.Context, name string, initialized bool) error {
	port, err := workloads.ensure(ctx, name)
	if err != nil {
		return err
	}
	c := mgmt.Client
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: clusterv1.ClusterSpec{
			Paused:               ptr.To(!initialized),
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: workloadHost, Port: port},
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
			},
		},
	}
	if err := c.Create(ctx, cluster); err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(cluster)
	owner := *metav1.NewControllerRef(cluster, clusterv1.GroupVersion.WithKind("Cluster"))
	if err := workloads.certs.SaveGenerated(ctx, c, key, owner); err != nil {
		return err
	}
	kc, err := workloads.kubeconfigFor(port)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, kubeconfig.GenerateSecretWithOwner(key, kc, owner)); err != nil {
		return err
	}
	before := cluster.DeepCopy()
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	if initialized {
		setControlPlaneInitialized(cluster)
	}
	return c.Status().Patch(ctx, cluster, client.MergeFrom(before))
}

func setControlPlaneInitialized(cluster *clusterv1.Cluster) {
	cluster.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	conditions.Set(cluster, metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: "Scale"})
}

// addMachine creates Machine i of a Cluster and its KubeadmConfig: i == 0
// initializes the control plane when init is set, joins it otherwise; the
// others are workers, cloud-config and Ignition alternating.
func (f *fleet) addMachine(ctx context.Context, clusterName string, i int, init bool) (string, error) {
	name := fmt.Sprintf("%s-m-%04d", clusterName, i)
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName}
	spec := bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.CloudConfig}
	switch {
	case i == 0 && init:
		labels[clusterv1.MachineControlPlaneLabel] = ""
		spec.InitConfiguration.NodeRegistration.Name = name
	case i == 0:
		labels[clusterv1.MachineControlPlaneLabel] = ""
		spec.JoinConfiguration.NodeRegistration.Name = name
		spec.JoinConfiguration.ControlPlane = &upstreambootstrapv1.JoinControlPlane{}
	default:
		spec.JoinConfiguration.NodeRegistration.Name = name
		if i%2 == 0 {
			spec.Format = bootstrapv1.Ignition
		}
	}
	// In Cluster API's order: a MachineSet creates the config (owned by
	// itself; here by nothing), then the Machine, and the Machine controller
	// then makes the Machine the config's owner.
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}},
		Spec:       spec,
	}
	if err := mgmt.Client.Create(ctx, cfg); err != nil {
		return "", err
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: clusterName, Version: "v1.36.3",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "ScaleMachine", Name: name},
		},
	}
	if err := mgmt.Client.Create(ctx, m); err != nil {
		return "", err
	}
	before := cfg.DeepCopy()
	cfg.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: m.UID, Controller: ptr.To(true)}}
	return name, mgmt.Client.Patch(ctx, cfg, client.MergeFrom(before))
}

// baseline is what a run's figures are counted from.
type baseline struct {
	mgmt     requestcount.Counts
	workload map[string]float64
	cpu      float64
}

func (f *fleet) baseline(b *testing.B) baseline {
	workload, err := requests()
	must(b, err)
	return baseline{mgmt: f.mgmtCounter.Snapshot(), workload: workload, cpu: f.mgr.metric(b, "process_cpu_seconds_total")}
}

// collect fills in what the run cost since base, and the manager's memory,
// goroutines and workload connections now.
func (f *fleet) collect(b *testing.B, ctx context.Context, base baseline, r *clustersResult) {
	r.counts = f.mgmtCounter.Snapshot().Since(base.mgmt)
	r.qps = managementQPS()
	r.cpu = f.mgr.metric(b, "process_cpu_seconds_total") - base.cpu
	after, err := requests()
	must(b, err)
	r.workloadReqs = map[string]float64{}
	for k, v := range after {
		r.workloadReqs[k] = v - base.workload[k]
	}
	r.tokens, err = workloads.tokens(ctx, f.names)
	must(b, err)
	r.heapMB, r.rssMB, r.routines = f.mgr.liveHeap(b)
	r.conns, err = connectionsToWorkloads()
	must(b, err)
}

// markInitialized marks a Cluster's control plane initialized, as a
// control-plane provider does once the first node is up.
func (f *fleet) markInitialized(ctx context.Context, name string) error {
	cluster := &clusterv1.Cluster{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, cluster); err != nil {
		return err
	}
	before := cluster.DeepCopy()
	setControlPlaneInitialized(cluster)
	return mgmt.Client.Status().Patch(ctx, cluster, client.MergeFrom(before))
}

// unpause sets a Cluster's spec.paused to false in one request.
func (f *fleet) unpause(ctx context.Context, name string) error {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
	return mgmt.Client.Patch(ctx, cluster, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`)))
}

func (f *fleet) start(b *testing.B, ctx context.Context) {
	f.mgr = startManager(b, f.impl, f.ns, f.kubeconfig, "--profiler-address=127.0.0.1:"+strconv.Itoa(process.FreePort(b)))
	var err error
	f.watch, err = watchReadiness(ctx, f.ns)
	must(b, err)
}

// settle waits until the manager has recorded what it sees before the clock
// starts (each config's Paused condition: one status write per config, which
// takes 30 s for 3000 configs at 100 writes a second) and has been quiet for
// 3 s, so that the clock measures bootstrapping, not start-up.
func (f *fleet) settle(b *testing.B) {
	start := time.Now()
	_, last := f.mgmtCounter.Snapshot().Total()
	quiet := time.Now()
	for time.Since(quiet) < 3*time.Second || time.Since(start) < 5*time.Second {
		time.Sleep(500 * time.Millisecond)
		if _, w := f.mgmtCounter.Snapshot().Total(); w != last {
			last, quiet = w, time.Now()
		}
		if time.Since(start) > 15*time.Minute {
			b.Fatalf("%s's manager still writing 15 minutes after it started\n%s", f.impl, f.mgr.logTail())
		}
	}
	b.Logf("%s: settled %s after start (%d writes)", f.impl, time.Since(start).Round(time.Second), last)
}

// readiness records, per KubeadmConfig, when it became ready to get its data
// and when this harness first saw dataSecretCreated on it.
type readiness struct {
	mu      sync.Mutex
	readyAt map[string]time.Time // config name -> ready
	dataAt  map[string]time.Time // config name -> data seen
	onData  func(cfg *bootstrapv1.KubeadmConfig)
	changed chan struct{}
}

func watchReadiness(ctx context.Context, ns string) (*readiness, error) {
	r := &readiness{readyAt: map[string]time.Time{}, dataAt: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	c, err := cache.New(mgmt.Config, cache.Options{Scheme: mgmt.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &bootstrapv1.KubeadmConfig{})
	if err != nil {
		return nil, err
	}
	seen := func(obj any) {
		cfg, ok := obj.(*bootstrapv1.KubeadmConfig)
		if !ok || !ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) {
			return
		}
		r.mu.Lock()
		_, known := r.dataAt[cfg.Name]
		if !known {
			r.dataAt[cfg.Name] = time.Now()
		}
		onData := r.onData
		r.mu.Unlock()
		if !known {
			if onData != nil {
				onData(cfg)
			}
			select {
			case r.changed <- struct{}{}:
			default:
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the harness's KubeadmConfig watch did not sync")
	}
	return r, nil
}

func (r *readiness) setOnData(f func(cfg *bootstrapv1.KubeadmConfig)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onData = f
}

func (r *readiness) ready(names []string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		r.readyAt[n] = at
	}
}

// wait returns when every one of names has its data, or fails after timeout.
func (r *readiness) wait(b *testing.B, names []string, timeout time.Duration, onTimeout func() string) time.Time {
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		var last time.Time
		missing := 0
		for _, n := range names {
			at, ok := r.dataAt[n]
			if !ok {
				missing++
			} else if at.After(last) {
				last = at
			}
		}
		r.mu.Unlock()
		if missing == 0 {
			return last
		}
		select {
		case <-r.changed:
		case <-time.After(time.Second):
		case <-deadline:
			b.Fatalf("%d of %d configs without data after %s\n%s", missing, len(names), timeout, onTimeout())
		}
	}
}

// latencies are the names' times from ready to data, sorted.
func (r *readiness) latencies(names []string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for _, n := range names {
		ready, ok1 := r.readyAt[n]
		data, ok2 := r.dataAt[n]
		if ok1 && ok2 {
			out = append(out, max(0, data.Sub(ready)))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// clustersResult is one implementation's many-cluster run.
type clustersResult struct {
	impl         string
	shape        shape
	n            int // configs measured; shape.configs() when 0
	wall         time.Duration
	lat          []time.Duration
	counts       requestcount.Counts
	workloadReqs map[string]float64
	tokens       int
	heapMB       float64 // live heap after a forced collection
	rssMB        float64 // the manager's resident memory then
	routines     float64
	cpu          float64
	conns        int
	newInit      time.Duration // the extra Cluster's initializing config: ready -> data
	newJoin      time.Duration // its worker: control plane up -> data
	qps          float64       // the manager's management-cluster client limit
	floor        time.Duration // writes at that limit (see floorFor)
}

func (r clustersResult) configs() int {
	if r.n > 0 {
		return r.n
	}
	return r.shape.configs()
}

func (r clustersResult) report(b *testing.B) {
	n := float64(r.configs())
	total, writes := r.counts.Total()
	b.ReportMetric(n, "configs")
	b.ReportMetric(r.wall.Seconds(), "s-all-ready")
	if r.floor > 0 {
		b.ReportMetric(r.floor.Seconds(), "s-floor")
	}
	b.ReportMetric(float64(total)/n, "requests/config")
	b.ReportMetric(float64(writes)/n, "writes/config")
	b.ReportMetric(r.workloadReqs["post secrets"]/n, "token-creates/config")
	b.ReportMetric(float64(r.tokens)/n, "tokens/config")
	b.ReportMetric(ms(percentile(r.lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(r.lat, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(r.lat, 1)), "max-ms")
	b.ReportMetric(r.heapMB, "heap-MB")
	b.ReportMetric(r.rssMB, "rss-MB")
	b.ReportMetric(r.routines, "goroutines")
	b.ReportMetric(float64(r.conns), "workload-conns")
	b.ReportMetric(r.cpu, "cpu-s")
	b.ReportMetric(r.cpu*1000/n, "cpu-ms/config")
	if r.newInit > 0 {
		b.ReportMetric(ms(r.newInit), "new-cluster-init-ms")
		b.ReportMetric(ms(r.newJoin), "new-cluster-join-ms")
	}
	var rows []string
	for k, v := range r.counts.Requests {
		rows = append(rows, fmt.Sprintf("  %-42s %8.3f", k, float64(v)/n))
	}
	sort.Strings(rows)
	var wrows []string
	for k, v := range r.workloadReqs {
		if v > 0 {
			wrows = append(wrows, fmt.Sprintf("  %-42s %8.3f", k, v/n))
		}
	}
	sort.Strings(wrows)
	b.Logf("%s, %s: all %d configs have data after %s (floor %s; %.0f writes, the client limit %.0f/s); latency p50 %s p99 %s max %s; heap %.1f MB, %0.f goroutines, %d workload connections\nmanagement API requests per config:\n%s\nworkload API requests per config:\n%s",
		r.impl, r.shape, r.configs(), r.wall.Round(time.Millisecond), r.floor.Round(time.Millisecond), float64(writes), r.qps,
		percentile(r.lat, 0.5).Round(time.Millisecond), percentile(r.lat, 0.99).Round(time.Millisecond), percentile(r.lat, 1).Round(time.Millisecond),
		r.heapMB, r.routines, r.conns, strings.Join(rows, "\n"), strings.Join(wrows, "\n"))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// managementQPS is the managers' --kube-api-qps: 100 in both (their main.go
// defaults) unless SCALE_FLAGS sets one.
func managementQPS() float64 {
	for _, f := range strings.Fields(os.Getenv("SCALE_FLAGS")) {
		if v, ok := strings.CutPrefix(f, "--kube-api-qps="); ok {
			if q, err := strconv.ParseFloat(v, 64); err == nil {
				return q
			}
		}
	}
	return 100
}

// floorFor is the least time the client limits allow for a shape, as the
// issue that asked for this run defines it: writesPerMachine management
// writes each at --kube-api-qps, and each cluster's M-1 token creates at its
// workload client's 20 per second (clusters in parallel).
func floorFor(s shape, writesPerMachine float64) time.Duration {
	mgmtFloor := float64(s.configs()) * writesPerMachine / managementQPS()
	tokenFloor := float64(s.machines-1) / 20
	return time.Duration(max(mgmtFloor, tokenFloor) * float64(time.Second))
}

func runClusters(b *testing.B, impl string, s shape) clustersResult {
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFleet(b, ctx, impl, fmt.Sprintf("%s-%s", impl, s), s.clusters)
	b.Logf("%s, %s: workload API servers up; creating %d Clusters and %d Machines", impl, s, s.clusters, s.configs())
	inParallel(b, 8, len(f.names), func(i int) error { return f.addCluster(ctx, f.names[i], false) })
	configsOf := map[string][]string{}
	var mu sync.Mutex
	inParallel(b, 8, s.configs(), func(i int) error {
		cl := f.names[i/s.machines]
		name, err := f.addMachine(ctx, cl, i%s.machines, true)
		mu.Lock()
		configsOf[cl] = append(configsOf[cl], name)
		mu.Unlock()
		return err
	})
	var all []string
	for _, names := range configsOf {
		all = append(all, names...)
	}

	f.start(b, ctx)
	defer f.mgr.stop(b)
	f.settle(b)
	before := f.baseline(b)

	// When a Cluster's initializing config has its data, its control plane
	// comes up (instantly) and its workers are ready.
	var wg sync.WaitGroup
	f.watch.setOnData(func(cfg *bootstrapv1.KubeadmConfig) {
		if !strings.HasSuffix(cfg.Name, "-m-0000") {
			return
		}
		cl := cfg.Labels[clusterv1.ClusterNameLabel]
		wg.Go(func() {
			if err := f.markInitialized(ctx, cl); err != nil {
				b.Errorf("marking %s's control plane initialized: %v", cl, err)
				return
			}
			var workers []string
			for _, n := range configsOf[cl] {
				if !strings.HasSuffix(n, "-m-0000") {
					workers = append(workers, n)
				}
			}
			f.watch.ready(workers, time.Now())
		})
	})

	b.Logf("%s, %s: unpausing %d Clusters", impl, s, s.clusters)
	b.StartTimer()
	t0 := time.Now()
	inParallel(b, 64, len(f.names), func(i int) error {
		cl := f.names[i]
		if err := f.unpause(ctx, cl); err != nil {
			return err
		}
		f.watch.ready([]string{cl + "-m-0000"}, time.Now())
		return nil
	})
	b.Logf("%s, %s: all Clusters unpaused in %s", impl, s, time.Since(t0).Round(time.Millisecond))
	last := f.watch.wait(b, all, envDuration(b, "SCALE_TIMEOUT", 30*time.Minute), f.mgr.logTail)
	wall := last.Sub(t0)
	b.StopTimer()
	wg.Wait()
	// The last writes' watch events land within moments.
	time.Sleep(2 * time.Second)
	r := clustersResult{impl: impl, shape: s, wall: wall, lat: f.watch.latencies(all), floor: floorFor(s, 2)}
	f.collect(b, ctx, before, &r)

	// One more Cluster among the C served ones: how long its first machines
	// wait for their data.
	if s.clusters >= 100 {
		r.newInit, r.newJoin = f.newCluster(b, ctx)
	}
	return r
}

// newCluster adds a Cluster with an initializing machine and a worker to a
// running fleet and returns how long each waited for its data.
func (f *fleet) newCluster(b *testing.B, ctx context.Context) (initWait, joinWait time.Duration) {
	name := fmt.Sprintf("w-new-%s", f.ns)
	must(b, f.addCluster(ctx, name, false))
	var cfgs []string
	for i := range 2 {
		cfg, err := f.addMachine(ctx, name, i, true)
		must(b, err)
		cfgs = append(cfgs, cfg)
	}
	initialized := make(chan time.Time, 1)
	f.watch.setOnData(func(cfg *bootstrapv1.KubeadmConfig) {
		if cfg.Name != cfgs[0] {
			return
		}
		go func() {
			if err := f.markInitialized(ctx, name); err != nil {
				b.Errorf("marking %s's control plane initialized: %v", name, err)
			}
			now := time.Now()
			f.watch.ready(cfgs[1:], now)
			initialized <- now
		}()
	})
	time.Sleep(2 * time.Second) // the new objects are in the manager's caches
	must(b, f.unpause(ctx, name))
	f.watch.ready(cfgs[:1], time.Now())
	f.watch.wait(b, cfgs, 5*time.Minute, f.mgr.logTail)
	<-initialized
	lat := f.watch.latencies(cfgs[:1])
	join := f.watch.latencies(cfgs[1:])
	return lat[0], join[0]
}

// liveHeap forces a collection in the manager (its profiler's heap endpoint
// with gc=1) and reads the live heap, resident memory and goroutines from its
// metrics.
func (m *manager) liveHeap(b *testing.B) (heapMB, rssMB, goroutines float64) {
	if m.profiler != "" {
		resp, err := http.Get("http://" + m.profiler + "/debug/pprof/heap?gc=1")
		must(b, err)
		// SCALE_PROFILES names a directory for the heap profiles, one per run.
		if dir := os.Getenv("SCALE_PROFILES"); dir != "" {
			name := filepath.Join(dir, strings.NewReplacer("/", "_", "=", "-").Replace(b.Name())+".heap.pb.gz")
			if data, err := io.ReadAll(resp.Body); err == nil {
				must(b, os.WriteFile(name, data, 0o644))
			}
		}
		resp.Body.Close()
	}
	return m.metric(b, "go_memstats_heap_alloc_bytes") / (1 << 20), m.metric(b, "process_resident_memory_bytes") / (1 << 20), m.metric(b, "go_goroutines")
}
