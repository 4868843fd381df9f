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
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/requestcount"

	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/manager"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// BenchmarkReconcileRequests has the manager bootstrap worker machines and
// reports the management-cluster API requests it made per KubeadmConfig, by
// verb and resource, from the moment its caches were running to the moment
// every config had its data. Workload-cluster requests are the token creates
// (one per config), reported as tokens/config.
func BenchmarkReconcileRequests(b *testing.B) {
	const configs = 50
	for range b.N {
		b.StopTimer()
		counter := requestcount.New()
		cfg := rest.CopyConfig(mgmt.Config)
		cfg.Wrap(counter.Wrap)

		hooks := mgmt.Webhooks()
		opts, err := manager.ParseFlags([]string{
			fmt.Sprintf("--webhook-port=%d", hooks.Port), "--webhook-cert-dir=" + hooks.CertDir,
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
		if err := testenv.WaitForTLS(fmt.Sprintf("%s:%d", hooks.Host, hooks.Port), 30*time.Second); err != nil {
			b.Fatal(err)
		}
		mgr.GetCache().WaitForCacheSync(ctx)

		f := newRunningCluster(b)
		time.Sleep(time.Second) // let the cluster cache connect and the informers settle
		before := counter.Snapshot()

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
		counts := counter.Snapshot().Since(before)
		tokens := 0
		for _, c := range list {
			tokens += len(tokensOf(b, c))
		}
		cancel()
		<-done //nolint:errcheck // the manager, stopped: checked by the tests, not the benchmark

		var rows []string
		for k, v := range counts.Requests {
			rows = append(rows, fmt.Sprintf("  %-40s %6.2f", k, float64(v)/configs))
		}
		sort.Strings(rows)
		total, w := counts.Total()
		writes := float64(w) / configs
		b.Logf("management API requests per KubeadmConfig (%d worker configs):\n%s\n  %-40s %6.2f\n  %-40s %6.2f\n  tokens created in the workload cluster per config: %.2f",
			configs, strings.Join(rows, "\n"), "writes", writes, "all", float64(total)/configs, float64(tokens)/configs)
		b.ReportMetric(writes, "writes/config")
		b.ReportMetric(float64(total)/configs, "requests/config")
		b.ReportMetric(float64(tokens)/configs, "tokens/config")
	}
}
