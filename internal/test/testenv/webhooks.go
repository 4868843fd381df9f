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
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// addWebhookDNSName replaces the webhook server's certificate with one that
// also carries name, and makes every webhook and conversion configuration
// that trusted the old one trust the new one. envtest's own certificate can
// carry only the names its webhook URLs use; the API server cannot resolve
// a Service's name, a Runtime SDK client can (under its hosts file).
func (e *Environment) addWebhookDNSName(ctx context.Context, name string) error {
	o := &e.env.WebhookInstallOptions
	host := o.LocalServingHost
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, []string{"localhost", name})
	if err != nil {
		return fmt.Errorf("webhook certificate for %s: %w", name, err)
	}
	for file, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(o.LocalServingCertDir, file), data, 0o600); err != nil {
			return err
		}
	}
	old := o.LocalServingCAData
	o.LocalServingCAData = certPEM
	return e.replaceCABundle(ctx, old, certPEM)
}

// replaceCABundle sets ca wherever a webhook or conversion configuration
// trusts old.
func (e *Environment) replaceCABundle(ctx context.Context, old, ca []byte) error {
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := e.Client.List(ctx, validating); err != nil {
		return err
	}
	for i := range validating.Items {
		c := &validating.Items[i]
		var bundles []*[]byte
		for j := range c.Webhooks {
			bundles = append(bundles, &c.Webhooks[j].ClientConfig.CABundle)
		}
		if err := e.swapCABundles(ctx, c, bundles, old, ca); err != nil {
			return err
		}
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := e.Client.List(ctx, mutating); err != nil {
		return err
	}
	for i := range mutating.Items {
		c := &mutating.Items[i]
		var bundles []*[]byte
		for j := range c.Webhooks {
			bundles = append(bundles, &c.Webhooks[j].ClientConfig.CABundle)
		}
		if err := e.swapCABundles(ctx, c, bundles, old, ca); err != nil {
			return err
		}
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := e.Client.List(ctx, crds); err != nil {
		return err
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if conv := crd.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
			if err := e.swapCABundles(ctx, crd, []*[]byte{&conv.Webhook.ClientConfig.CABundle}, old, ca); err != nil {
				return err
			}
		}
	}
	return nil
}

// swapCABundles sets ca in those of obj's bundles that are old, and
// updates obj if any was.
func (e *Environment) swapCABundles(ctx context.Context, obj client.Object, bundles []*[]byte, old, ca []byte) error {
	changed := false
	for _, b := range bundles {
		if bytes.Equal(*b, old) {
			*b, changed = ca, true
		}
	}
	if !changed {
		return nil
	}
	return e.Client.Update(ctx, obj)
}
