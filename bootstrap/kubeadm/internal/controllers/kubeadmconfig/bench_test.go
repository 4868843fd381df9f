package kubeadmconfig_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/manager"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testenv"
)

// requestCounter counts the management-cluster API requests a manager makes,
// by verb and resource.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.counts[verbAndResource(req)]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// verbAndResource names a request the way the API server's audit log does:
// get, list, watch, create, update, patch, delete on resource[/subresource].
func verbAndResource(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource, named := "", false
	if len(parts) > 0 {
		resource = parts[0]
		named = len(parts) > 1
		if len(parts) > 2 {
			resource += "/" + parts[2]
		}
	}
	verb := strings.ToLower(req.Method)
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	}
	return verb + " " + resource
}

// BenchmarkReconcileRequests has the manager bootstrap worker machines and
// reports the management-cluster API requests it made per KubeadmConfig, by
// verb and resource, from the moment its caches were running to the moment
// every config had its data. Workload-cluster requests are the token creates
// (one per config), reported as tokens/config.
func BenchmarkReconcileRequests(b *testing.B) {
	const configs = 50
	for range b.N {
		b.StopTimer()
		counter := &requestCounter{counts: map[string]int{}}
		cfg := rest.CopyConfig(mgmt.Config)
		cfg.Wrap(counter.wrap)

		hooks := mgmt.Environment.WebhookInstallOptions
		opts, err := manager.ParseFlags([]string{
			fmt.Sprintf("--webhook-port=%d", hooks.LocalServingPort), "--webhook-cert-dir=" + hooks.LocalServingCertDir,
			"--health-addr=0", "--diagnostics-address=0", "--insecure-diagnostics",
		})
		if err != nil {
			b.Fatal(err)
		}
		opts.ManyPerProcess = true
		toolscache.ResetInformerNamesForTesting()
		ctx, cancel := context.WithCancel(context.Background())
		mgr, err := manager.New(ctx, opts, cfg)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()
		if err := testenv.WaitForTLS(fmt.Sprintf("%s:%d", hooks.LocalServingHost, hooks.LocalServingPort), 30*time.Second); err != nil {
			b.Fatal(err)
		}
		mgr.GetCache().WaitForCacheSync(ctx)

		f := newRunningCluster(b)
		time.Sleep(time.Second) // let the cluster cache connect and the informers settle
		before := counter.snapshot()

		b.StartTimer()
		var list []*bootstrapv1.KubeadmConfig
		for i := range configs {
			_, c := f.machine(fmt.Sprintf("worker-%03d", i), false, joinSpec(bootstrapv1.CloudConfig, false))
			list = append(list, c)
		}
		for _, c := range list {
			for !ptr.Deref(c.Status.Initialization.DataSecretCreated, false) {
				time.Sleep(50 * time.Millisecond)
				if err := mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(c), c); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		// Requests that follow from the last writes (the status patch's own
		// watch event) land within moments.
		time.Sleep(2 * time.Second)
		after := counter.snapshot()
		tokens := 0
		for _, c := range list {
			tokens += len(tokensOf(b, c))
		}
		cancel()
		<-done

		var rows []string
		var writes, total float64
		for k, v := range after {
			d := float64(v-before[k]) / configs
			if d == 0 {
				continue
			}
			rows = append(rows, fmt.Sprintf("  %-40s %6.2f", k, d))
			total += d
			verb := strings.Fields(k)[0]
			if verb == "create" || verb == "update" || verb == "patch" || verb == "delete" {
				writes += d
			}
		}
		sort.Strings(rows)
		b.Logf("management API requests per KubeadmConfig (%d worker configs):\n%s\n  %-40s %6.2f\n  %-40s %6.2f\n  tokens created in the workload cluster per config: %.2f",
			configs, strings.Join(rows, "\n"), "writes", writes, "all", total, float64(tokens)/configs)
		b.ReportMetric(writes, "writes/config")
		b.ReportMetric(total, "requests/config")
		b.ReportMetric(float64(tokens)/configs, "tokens/config")
	}
}
