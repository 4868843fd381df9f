package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/manager"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testenv"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func buildManager(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "manager")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func kubeconfigFor(t *testing.T, env *testenv.Env) string {
	t.Helper()
	user, err := env.Environment.AddUser(envtest.User{Name: "manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestManagerServesHealthAndReadiness starts the real binary against a real
// API server and probes it the way a kubelet would.
func TestManagerServesHealthAndReadiness(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	bin := buildManager(t)
	kubeconfig := kubeconfigFor(t, env)
	healthPort := freePort(t)

	var logs bytes.Buffer
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		fmt.Sprintf("--health-addr=127.0.0.1:%d", healthPort),
		fmt.Sprintf("--diagnostics-address=127.0.0.1:%d", freePort(t)),
		"--insecure-diagnostics",
		"--leader-elect",
		"--leader-elect-namespace=default",
		"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true",
	)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, endpoint := range []string{"/healthz", "/readyz"} {
		url := fmt.Sprintf("http://127.0.0.1:%d%s", healthPort, endpoint)
		for {
			resp, err := http.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case err := <-done:
				t.Fatalf("manager exited before %s answered: %v\n%s", endpoint, err, logs.String())
			case <-ctx.Done():
				t.Fatalf("%s never answered 200 (last error %v)\n%s", endpoint, err, logs.String())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}

	// A clean shutdown on SIGTERM, as in a pod deletion.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("manager did not exit cleanly: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("manager did not stop on SIGTERM\n%s", logs.String())
	}
}

func TestManagerRejectsUnknownFeatureGate(t *testing.T) {
	err := manager.Run(context.Background(), []string{"--feature-gates=NoSuchGate=true"})
	if err == nil || !strings.Contains(err.Error(), "NoSuchGate") {
		t.Fatalf("expected an error naming the unknown gate, got %v", err)
	}
}
