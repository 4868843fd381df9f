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

package testenv_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// A webhook server whose certificate also carries a Service's name is
// trusted by that name (as a Runtime SDK client calls it) and still by the
// API server, whose webhook and conversion configurations follow the new
// certificate.
func TestWebhookCertificateCarriesTheServiceName(t *testing.T) {
	const name = "webhook-service.provider-system.svc"
	env := testenv.Start(t, testenv.Options{WithWebhooks: true, WebhookDNSName: name})
	env.StartWebhooks(t, feature.NewFeatureGates())
	w := env.Webhooks()

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(w.CAData) {
		t.Fatal("the webhooks' CA data holds no certificate")
	}
	conn, err := tls.Dial("tcp", w.Address(), &tls.Config{RootCAs: roots, ServerName: name})
	if err != nil {
		t.Fatalf("the webhook server is not trusted as %s: %v", name, err)
	}
	_ = conn.Close()

	// The API server calls the defaulting webhook and converts through the
	// conversion webhook, both with the new certificate.
	cfg := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "through-the-webhooks"}}
	if err := env.Client.Create(context.Background(), cfg); err != nil {
		t.Fatalf("creating a KubeadmConfig through the webhooks: %v", err)
	}
	old := &unstructured.Unstructured{}
	old.SetAPIVersion(bootstrapv1.GroupVersion.Group + "/v1beta1")
	old.SetKind("KubeadmConfig")
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cfg), old); err != nil {
		t.Fatalf("reading it as v1beta1 through the conversion webhook: %v", err)
	}
}
