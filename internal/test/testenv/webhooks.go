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

package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/webhooks"
)

// ServeWebhooks runs this provider's admission webhooks, with gates, on the
// TLS port and certificate envtest registered with the API server, until the
// test ends. Env must have been started WithWebhooks.
func (e *Env) ServeWebhooks(t testing.TB, gates featuregate.FeatureGate) {
	t.Helper()
	e.StartWebhooks(t, gates)
}

// StartWebhooks is ServeWebhooks until stop is called (or the test ends), so
// that a manager can take over the port.
func (e *Env) StartWebhooks(t testing.TB, gates featuregate.FeatureGate) (stop func()) {
	t.Helper()
	opts := e.Environment.WebhookInstallOptions
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:  e.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: opts.LocalServingHost, Port: opts.LocalServingPort, CertDir: opts.LocalServingCertDir,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhooks.SetupWithManager(mgr, gates); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Logf("webhook manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	if err := WaitForTLS(fmt.Sprintf("%s:%d", opts.LocalServingHost, opts.LocalServingPort), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return stop
}

// WaitForTLS waits until addr completes a TLS handshake.
func WaitForTLS(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server at %s not serving TLS: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
