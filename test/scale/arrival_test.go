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
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkScaleArrival: machines arrive at a steady rate (SCALE_ARRIVAL_RATE
// per second, 10 by default, for SCALE_ARRIVAL_DURATION, 5m) across
// SCALE_ARRIVAL_CLUSTERS running workload clusters (1000), one cluster after
// the other; each arrival is a worker's KubeadmConfig and Machine, made in
// Cluster API's order (config, Machine, the config handed to the Machine),
// ready once the config has its Machine as owner. Latency per config runs
// from then to this harness seeing dataSecretCreated.
func BenchmarkScaleArrival(b *testing.B) {
	serveWebhooks(b)
	clusters := envInt(b, "SCALE_ARRIVAL_CLUSTERS", 1000)
	rate := envInt(b, "SCALE_ARRIVAL_RATE", 10)
	duration := envDuration(b, "SCALE_ARRIVAL_DURATION", 5*time.Minute)
	for _, impl := range impls() {
		b.Run(fmt.Sprintf("clusters=%d/rate=%d/impl=%s", clusters, rate, impl), func(b *testing.B) {
			for range b.N {
				runArrival(b, impl, clusters, rate, duration).report(b)
			}
		})
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s: %q is not a positive number", name, v)
	}
	return n
}

func runArrival(b *testing.B, impl string, clusters, rate int, duration time.Duration) clustersResult {
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFleet(b, ctx, impl, fmt.Sprintf("%s-arrival-%d", impl, clusters), clusters)
	inParallel(b, 8, len(f.names), func(i int) error { return f.addCluster(ctx, f.names[i], true) })
	f.start(b, ctx)
	defer f.mgr.stop(b)
	// Connected: the manager holds a connection to every workload cluster.
	t0 := time.Now()
	for {
		conns, err := connectionsToWorkloads()
		must(b, err)
		if conns >= clusters || time.Since(t0) > 3*time.Minute {
			b.Logf("%s: %d workload connections %s after start", impl, conns, time.Since(t0).Round(time.Second))
			break
		}
		time.Sleep(time.Second)
	}
	before := f.baseline(b)

	n := int(duration.Seconds()) * rate
	b.Logf("%s: %d machines arriving at %d/s across %d clusters", impl, n, rate, clusters)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		names []string
		errs  []error
	)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	b.StartTimer()
	start := time.Now()
	for k := range n {
		<-tick.C
		wg.Go(func() {
			name, err := f.addMachine(ctx, f.names[k%clusters], 1+k/clusters, false)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			f.watch.ready([]string{name}, time.Now())
			names = append(names, name)
		})
	}
	tick.Stop()
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("%d machines not created: %v", len(errs), errs[0])
	}
	last := f.watch.wait(b, names, 10*time.Minute, f.mgr.logTail)
	b.StopTimer()
	time.Sleep(2 * time.Second)
	r := clustersResult{impl: impl, shape: shape{clusters, n / clusters}, n: n, wall: last.Sub(start), lat: f.watch.latencies(names)}
	f.collect(b, ctx, before, &r)
	return r
}
