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

// Package availability measures whether a workload cluster answers while
// its machines are replaced: a probe reads through the control-plane
// endpoint every second and counts the requests that failed.
package availability

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Probe polls a cluster until Stop.
type Probe struct {
	done     chan struct{}
	finished chan struct{}

	mu       sync.Mutex
	requests int
	failures []time.Time
	lastErr  error
}

// Result is what a probe saw.
type Result struct {
	Requests, Failed int
	// LongestOutage is the longest stretch the cluster did not answer
	// (failed requests less than 2s apart count as one outage, and a
	// failure stands for the second before it too).
	LongestOutage time.Duration
	LastErr       error
}

func (r Result) String() string {
	return fmt.Sprintf("%d of %d requests through the control-plane endpoint failed; longest outage %s (last error: %v)",
		r.Failed, r.Requests, r.LongestOutage, r.LastErr)
}

// Watch starts polling the cluster cfg reaches, every second, with a read
// that reaches etcd.
func Watch(cfg *rest.Config) (*Probe, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	p := &Probe{done: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(p.finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
			// An empty resourceVersion asks for a quorum read: etcd answers.
			_, err := cs.CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceDefault, metav1.GetOptions{})
			p.record(time.Now(), err)
		}
	}()
	return p, nil
}

func (p *Probe) record(at time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	if err != nil {
		p.failures = append(p.failures, at)
		p.lastErr = err
	}
}

// Stop ends the polling and returns what it saw.
func (p *Probe) Stop() Result {
	close(p.done)
	<-p.finished
	p.mu.Lock()
	defer p.mu.Unlock()
	return Result{Requests: p.requests, Failed: len(p.failures), LongestOutage: longestOutage(p.failures), LastErr: p.lastErr}
}

func longestOutage(failures []time.Time) time.Duration {
	var longest time.Duration
	for i := 0; i < len(failures); {
		j := i
		for j+1 < len(failures) && failures[j+1].Sub(failures[j]) < 2*time.Second {
			j++
		}
		longest = max(longest, failures[j].Sub(failures[i])+time.Second)
		i = j + 1
	}
	return longest
}
