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

package management

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

const certManagerNamespace = "cert-manager"

// TestCertManagerIssuesInjectsAndValidates runs the cert-manager build
// against a real API server, each binary with the flags its manifest's
// Deployment gives it, and checks what Cluster API's providers rely on: a
// CA issued by a self-signed issuer signs a serving certificate, the CA
// injector puts that CA into a webhook configuration that asks for it, and
// cert-manager's own webhook, reached with the CA it injected into its own
// configuration, refuses an invalid Certificate.
func TestCertManagerIssuesInjectsAndValidates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	objects := readManifest(t, filepath.Join(testbin.CertManagerDir(), testbin.CertManagerManifest))
	kubeconfig, err := env.WriteAdminKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	webhookPort := process.FreePort(t)
	for _, o := range objects {
		if err := c.Create(ctx, localWebhook(o, webhookPort)); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	deployments := deploymentsByComponent(t, objects)
	// Each runs with its Deployment's flags, and what differs on one machine
	// from Pods of their own: the kubeconfig, ports, the webhook's name.
	start(t, cancel, "webhook", deploymentArgs(t, deployments["webhook"],
		"--kubeconfig="+kubeconfig, fmt.Sprintf("--secure-port=%d", webhookPort),
		fmt.Sprintf("--healthz-port=%d", process.FreePort(t)), "--metrics-listen-address=0",
		"--dynamic-serving-dns-names=localhost"))
	start(t, cancel, "controller", deploymentArgs(t, deployments["controller"],
		"--kubeconfig="+kubeconfig, fmt.Sprintf("--healthz-listen-address=127.0.0.1:%d", process.FreePort(t))))
	start(t, cancel, "cainjector", deploymentArgs(t, deployments["cainjector"], "--kubeconfig="+kubeconfig))

	t.Run("its webhook gets its CA", func(t *testing.T) {
		waitForCABundle(ctx, t, c, "cert-manager-webhook")
	})
	t.Run("a self-signed CA signs a serving certificate", func(t *testing.T) {
		apply(ctx, t, c, certManagerObject("ClusterIssuer", "", "selfsigned", map[string]any{"selfSigned": map[string]any{}}))
		apply(ctx, t, c, certificate("ca", map[string]any{
			"isCA": true, "commonName": "e2e-ca", "secretName": "e2e-ca",
			"issuerRef": map[string]any{"kind": "ClusterIssuer", "name": "selfsigned"},
		}))
		waitReady(ctx, t, c, "Certificate", "ca")
		apply(ctx, t, c, certManagerObject("Issuer", certManagerNamespace, "ca", map[string]any{"ca": map[string]any{"secretName": "e2e-ca"}}))
		apply(ctx, t, c, certificate("serving", map[string]any{
			"dnsNames": []any{"webhook-service.e2e.svc"}, "secretName": "serving",
			"issuerRef": map[string]any{"kind": "Issuer", "name": "ca"},
		}))
		waitReady(ctx, t, c, "Certificate", "serving")
		verifyChain(ctx, t, c)
	})
	t.Run("the injector puts the CA into a webhook configuration that asks for it", func(t *testing.T) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-injected", Annotations: map[string]string{
				"cert-manager.io/inject-ca-from": certManagerNamespace + "/serving",
			}},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    "e2e.example.com",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://webhook-service.e2e.svc/validate")},
				AdmissionReviewVersions: []string{"v1"},
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				// Matches nothing: only its CA bundle matters here.
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"e2e.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothing"}},
				}},
			}},
		}
		if err := c.Create(ctx, vwc); err != nil {
			t.Fatal(err)
		}
		bundle := waitForCABundle(ctx, t, c, vwc.Name)
		ca := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: certManagerNamespace, Name: "serving"}, ca); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bundle, ca.Data["ca.crt"]) {
			t.Errorf("injected CA bundle is not the serving certificate's CA")
		}
	})
	t.Run("its webhook refuses an invalid Certificate", func(t *testing.T) {
		err := c.Create(ctx, certificate("no-names", map[string]any{
			"secretName": "no-names", "issuerRef": map[string]any{"kind": "Issuer", "name": "ca"},
		}))
		// Refused by the webhook's validation, not for want of an answer.
		if err == nil || !strings.Contains(err.Error(), `admission webhook "webhook.cert-manager.io" denied the request`) {
			t.Fatalf("cert-manager's webhook did not refuse a Certificate without any name: %v", err)
		}
		t.Log(err)
	})
}

// readManifest splits cert-manager's manifest into objects.
func readManifest(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run hack/tools.sh cert-manager", err)
	}
	return decodeManifest(t, path, b)
}

// decodeManifest splits a multi-document manifest (read from path) into
// objects.
func decodeManifest(t *testing.T, path string, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var objects []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := d.Decode(&o.Object); errors.Is(err, io.EOF) {
			return objects
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(o.Object) > 0 {
			objects = append(objects, o)
		}
	}
}

// localWebhook points cert-manager's webhook configurations at the webhook
// process on this machine, in place of its Service: an API server without
// nodes reaches no Service.
func localWebhook(o *unstructured.Unstructured, port int) *unstructured.Unstructured {
	kind := o.GetKind()
	if kind != "ValidatingWebhookConfiguration" && kind != "MutatingWebhookConfiguration" {
		return o
	}
	webhooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
	for _, w := range webhooks {
		w := w.(map[string]any)
		cc := w["clientConfig"].(map[string]any)
		svc := cc["service"].(map[string]any)
		delete(cc, "service")
		cc["url"] = fmt.Sprintf("https://localhost:%d%s", port, svc["path"])
	}
	_ = unstructured.SetNestedSlice(o.Object, webhooks, "webhooks")
	return o
}

// deploymentsByComponent finds each Deployment by its component label.
func deploymentsByComponent(t *testing.T, objects []*unstructured.Unstructured) map[string]*appsv1.Deployment {
	t.Helper()
	out := map[string]*appsv1.Deployment{}
	for _, o := range objects {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
			t.Fatal(err)
		}
		out[d.Labels["app.kubernetes.io/component"]] = d
	}
	return out
}

// deploymentArgs is the command line of a Deployment's container as the
// kubelet would run it ($(POD_NAMESPACE) expanded), followed by more flags.
func deploymentArgs(t *testing.T, d *appsv1.Deployment, more ...string) []string {
	t.Helper()
	if d == nil {
		t.Fatal("the manifest lacks a cert-manager Deployment")
	}
	var args []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		args = append(args, strings.ReplaceAll(a, "$(POD_NAMESPACE)", certManagerNamespace))
	}
	return append(args, more...)
}

// start runs one of cert-manager's binaries until the test ends; if it exits
// before, the test fails and its waits end (cancel).
func start(t *testing.T, cancel context.CancelFunc, name string, args []string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(testbin.CertManagerDir(), name), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, stopping := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		err := cmd.Wait()
		select {
		case <-stopping:
		default:
			t.Errorf("cert-manager's %s exited: %v", name, err)
			cancel()
		}
	}()
	t.Cleanup(func() {
		close(stopping)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s's log:\n%s", name, tail(b, 40))
		}
	})
}

func tail(b []byte, lines int) string {
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// certManagerObject is an object of cert-manager's API group: an issuer, a
// certificate.
func certManagerObject(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cert-manager.io/v1", "kind": kind, "spec": spec}}
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

// certificate is a Certificate in cert-manager's namespace.
func certificate(name string, spec map[string]any) *unstructured.Unstructured {
	return certManagerObject("Certificate", certManagerNamespace, name, spec)
}

// apply creates an object, retrying while cert-manager's webhook does not
// answer yet (it starts beside the test).
func apply(ctx context.Context, t *testing.T, c client.Client, o *unstructured.Unstructured) {
	t.Helper()
	var err error
	for ctx.Err() == nil {
		if err = c.Create(ctx, o.DeepCopy()); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
}

// waitReady waits for an object's Ready condition to be True.
func waitReady(ctx context.Context, t *testing.T, c client.Client, kind, name string) {
	t.Helper()
	o := certManagerObject(kind, certManagerNamespace, name, nil)
	var last string
	for ctx.Err() == nil {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err == nil {
			conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
			for _, cond := range conditions {
				cond := cond.(map[string]any)
				if cond["type"] == "Ready" {
					if cond["status"] == "True" {
						return
					}
					last = fmt.Sprintf("%v: %v", cond["reason"], cond["message"])
				}
			}
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s %s never became Ready (last: %s)", kind, name, last)
}

// waitForCABundle waits for every webhook of a validating webhook
// configuration to have a CA bundle, and returns the first.
func waitForCABundle(ctx context.Context, t *testing.T, c client.Client, name string) []byte {
	t.Helper()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for ctx.Err() == nil {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, vwc); err == nil && injected(vwc) {
			return vwc.Webhooks[0].ClientConfig.CABundle
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("no CA bundle was injected into ValidatingWebhookConfiguration %s", name)
	return nil
}

func injected(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
	for _, w := range vwc.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			return false
		}
	}
	return len(vwc.Webhooks) > 0
}

// verifyChain checks that the serving certificate verifies against its CA
// for its DNS name.
func verifyChain(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: certManagerNamespace, Name: "serving"}, s); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
		t.Fatal("the serving Secret's ca.crt holds no certificate")
	}
	block, _ := pem.Decode(s.Data["tls.crt"])
	if block == nil {
		t.Fatal("the serving Secret's tls.crt holds no certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "webhook-service.e2e.svc"}); err != nil {
		t.Errorf("the serving certificate does not verify against its CA: %v", err)
	}
}
