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
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/webhooks"
)

// WebhookServing is where the API server calls this provider's webhooks
// (Options.WithWebhooks): a local TLS port and a certificate for it.
type WebhookServing struct {
	Host    string
	Port    int
	CertDir string
	// CAData is the certificate authority the API server trusts there.
	CAData []byte
}

// Address is Host:Port.
func (w WebhookServing) Address() string {
	return net.JoinHostPort(w.Host, strconv.Itoa(w.Port))
}

// Webhooks says where the API server calls this provider's webhooks.
func (e *Environment) Webhooks() WebhookServing {
	o := e.env.WebhookInstallOptions
	return WebhookServing{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir, CAData: o.LocalServingCAData}
}

// ServeWebhooks runs this provider's admission webhooks, with gates, where
// the API server calls them, until stop is called (so that a manager can
// take over the port). The Environment must have WithWebhooks.
func (e *Environment) ServeWebhooks(gates featuregate.FeatureGate) (stop func() error, err error) {
	w := e.Webhooks()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:        e.Scheme,
		Metrics:       metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{Host: w.Host, Port: w.Port, CertDir: w.CertDir}),
	})
	if err != nil {
		return nil, err
	}
	if err := webhooks.SetupWithManager(mgr, gates); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
		})
		return stopErr
	}
	if err := WaitForTLS(w.Address(), 30*time.Second); err != nil {
		_ = stop()
		return nil, err
	}
	return stop, nil
}

// StartWebhooks is ServeWebhooks for one test: stopped when the test ends,
// or earlier by stop.
func (e *Environment) StartWebhooks(t testing.TB, gates featuregate.FeatureGate) (stop func()) {
	t.Helper()
	stopServing, err := e.ServeWebhooks(gates)
	if err != nil {
		t.Fatal(err)
	}
	stop = func() {
		if err := stopServing(); err != nil {
			t.Logf("webhook manager: %v", err)
		}
	}
	t.Cleanup(stop)
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
