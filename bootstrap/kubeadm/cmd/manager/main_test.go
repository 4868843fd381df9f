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

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/manager"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

// runningManager is the manager binary running against an envtest API server.
type runningManager struct {
	cmd        *exec.Cmd
	done       chan error
	logs       *bytes.Buffer
	healthPort int
	kubeconfig string
}

// startBinary builds and starts the real manager binary against env, serving
// its webhooks where env registered them, and waits until /readyz answers.
func startBinary(t *testing.T, env *testenv.Environment, extra ...string) *runningManager {
	t.Helper()
	hooks := env.Webhooks()
	bin := filepath.Join(t.TempDir(), "manager")
	if err := process.Build(bin, "./bootstrap/kubeadm/cmd/manager"); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.WriteAdminKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := &runningManager{done: make(chan error, 1), logs: &bytes.Buffer{}, healthPort: process.FreePort(t), kubeconfig: kubeconfig}
	m.cmd = exec.Command(bin, append([]string{
		"--kubeconfig=" + kubeconfig,
		fmt.Sprintf("--health-addr=127.0.0.1:%d", m.healthPort),
		fmt.Sprintf("--diagnostics-address=127.0.0.1:%d", process.FreePort(t)),
		"--insecure-diagnostics",
		fmt.Sprintf("--webhook-port=%d", hooks.Port),
		"--webhook-cert-dir=" + hooks.CertDir,
	}, extra...)...)
	m.cmd.Stdout, m.cmd.Stderr = m.logs, m.logs
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(func() {
		if m.cmd.ProcessState == nil {
			_ = m.cmd.Process.Kill()
			<-m.done //nolint:errcheck // killed: its exit status says only that
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, endpoint := range []string{"/healthz", "/readyz"} {
		url := fmt.Sprintf("http://127.0.0.1:%d%s", m.healthPort, endpoint)
		for {
			resp, err := http.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case err := <-m.done:
				t.Fatalf("manager exited before %s answered: %v\n%s", endpoint, err, m.logs.String())
			case <-ctx.Done():
				t.Fatalf("%s never answered 200 (last error %v)\n%s", endpoint, err, m.logs.String())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return m
}

// TestManagerServesHealthAndReadiness starts the real binary against a real
// API server, probes it the way a kubelet would, and has the API server call
// its admission webhooks over TLS.
func TestManagerServesHealthAndReadiness(t *testing.T) {
	env := testenv.Start(t, testenv.Options{WithWebhooks: true, WithClusterAPI: true})
	m := startBinary(t, env, "--leader-elect", "--leader-elect-namespace=default", "--feature-gates=KubeadmBootstrapFormatIgnition=true")

	checkAdmission(t, env)

	// A clean shutdown on SIGTERM, as in a pod deletion.
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-m.done:
		if err != nil {
			t.Fatalf("manager did not exit cleanly: %v\n%s", err, m.logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("manager did not stop on SIGTERM\n%s", m.logs.String())
	}
}

// TestExamplesApply: every top-level file of examples/ is a Kubernetes object
// the API server admits (kubectl apply -f examples/, server-side dry run).
func TestExamplesApply(t *testing.T) {
	env := testenv.Start(t, testenv.Options{WithWebhooks: true, WithClusterAPI: true})
	m := startBinary(t, env, "--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true")
	cmd := exec.Command(testbin.MustPath(t, testbin.Kubectl), "--kubeconfig", m.kubeconfig, "apply", "--dry-run=server",
		"-f", filepath.Join(testenv.RepoRoot(), "examples"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -f examples/: %v\n%s", err, out)
	}
}

// TestREADMESample runs the README's "Try the controller" sample, unchanged,
// against the binary: the script applies a Cluster, a Machine and a
// KubeadmConfig with kubectl, and the controller writes the data secret.
func TestREADMESample(t *testing.T) {
	env := testenv.Start(t, testenv.Options{WithWebhooks: true, WithClusterAPI: true})
	m := startBinary(t, env)
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "examples", "local", "bootstrap.sh"))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+m.kubeconfig, "KUBECTL="+testbin.MustPath(t, testbin.Kubectl))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the sample failed: %v\n%s\nmanager:\n%s", err, out, m.logs.String())
	}
	for _, want := range []string{"cloud-config", "## template: jinja", "#cloud-config", "demo-cp-0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the sample's output lacks %q:\n%s", want, out)
		}
	}
}

// checkAdmission creates objects through the API server, which calls the
// manager's webhooks: the default format is filled in, the gate set on the
// command line admits ignition, and raw (gate off) is refused with the gate named.
func checkAdmission(t *testing.T, env *testenv.Environment) {
	t.Helper()
	ctx := context.Background()
	newConfig := func(name string, format bootstrapv1.Format) *bootstrapv1.KubeadmConfig {
		c := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		c.Spec.Format = format
		c.Spec.JoinConfiguration.NodeRegistration.Name = name
		return c
	}
	defaulted := newConfig("defaulted", "")
	if err := env.Client.Create(ctx, defaulted); err != nil {
		t.Fatalf("create: %v", err)
	}
	if defaulted.Spec.Format != bootstrapv1.CloudConfig {
		t.Errorf("format not defaulted by the mutating webhook: %q", defaulted.Spec.Format)
	}
	if err := env.Client.Create(ctx, newConfig("flatcar", bootstrapv1.Ignition)); err != nil {
		t.Errorf("ignition with its gate on: %v", err)
	}
	err := env.Client.Create(ctx, newConfig("agent", bootstrapv1.Raw))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "KubeadmBootstrapFormatRaw") {
		t.Errorf("raw with its gate off must be refused naming the gate, got %v", err)
	}
}

func TestManagerRefusesVerbosityThatLogsBodies(t *testing.T) {
	for _, args := range [][]string{{"-v=8"}, {"--vmodule=request=9"}} {
		err := manager.Run(context.Background(), args)
		if err == nil || !strings.Contains(err.Error(), "verbosity") {
			t.Errorf("%v: expected a refusal naming the verbosity, got %v", args, err)
		}
	}
}

// A clusterctl variable set to something that is not a boolean reaches the
// manager as --feature-gates=Gate=value: it refuses to start, naming both.
func TestManagerRefusesInvalidGateValues(t *testing.T) {
	for args, want := range map[string][]string{
		"--feature-gates=KubeadmBootstrapFormatRaw=yes":                   {"KubeadmBootstrapFormatRaw", "yes"},
		"--feature-gates=PriorityQueue=false,ReconcilerRateLimiting=true": {"ReconcilerRateLimiting", "PriorityQueue"},
		"--bootstrap-token-ttl=0s":                                        {"--bootstrap-token-ttl"},
	} {
		err := manager.Run(context.Background(), []string{args, "--kubeconfig=/nonexistent"})
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: want an error naming %q, got %v", args, w, err)
			}
		}
	}
}

// --help prints the usage and succeeds, as Cluster API's managers do.
func TestManagerHelpSucceeds(t *testing.T) {
	if err := manager.Run(context.Background(), []string{"--help"}); err != nil {
		t.Errorf("--help: %v", err)
	}
}

func TestManagerRejectsUnknownFeatureGate(t *testing.T) {
	err := manager.Run(context.Background(), []string{"--feature-gates=NoSuchGate=true"})
	if err == nil || !strings.Contains(err.Error(), "NoSuchGate") {
		t.Fatalf("expected an error naming the unknown gate, got %v", err)
	}
}
