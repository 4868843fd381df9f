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

package process

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Manager is a manager binary (this provider's or upstream's: they take the
// same flags for what tests set) running against an API server.
type Manager struct {
	Name        string
	cmd         *exec.Cmd
	done        chan error
	logs        string
	metricsAddr string
	memory      *memoryCgroup
}

// ManagerOptions says how to run a manager binary.
type ManagerOptions struct {
	// Binary is the manager's executable; Name names it in messages.
	Binary, Name string
	// Kubeconfig reaches the management API server.
	Kubeconfig []byte
	// WebhookCertDir holds a serving certificate for the manager's webhook
	// server, on WebhookPort (a free port, idle, when 0). Empty: the
	// manager serves no webhooks and gets no webhook flags.
	WebhookCertDir string
	WebhookPort    int
	// Args are further flags.
	Args []string
	// Wrap, when set, is the command line the binary runs under (e.g. a
	// namespace it needs); the binary and its flags follow it.
	Wrap []string
	// Dir receives the manager's kubeconfig and log (<Name>.log);
	// StartManager uses the test's temporary directory when it is empty.
	Dir string
	// MemoryLimit, when set, runs the manager as its Deployment's container
	// does with that memory limit: in a memory cgroup limited to it (the
	// kernel kills the manager over it) and with GOMEMLIMIT set to it.
	MemoryLimit int64
}

// StartManager starts a manager binary for a test (its files in the test's
// temporary directory, stopped when the test ends) and waits until it serves
// metrics.
func StartManager(t testing.TB, o ManagerOptions) *Manager {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	m, err := RunManager(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

// RunManager starts a manager binary and waits until it serves metrics; the
// caller stops it.
func RunManager(o ManagerOptions) (*Manager, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("%s manager: no directory for its files", o.Name)
	}
	kc := filepath.Join(o.Dir, o.Name+".kubeconfig")
	if err := os.WriteFile(kc, o.Kubeconfig, 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	m := &Manager{Name: o.Name, done: make(chan error, 1), logs: filepath.Join(o.Dir, o.Name+".log"), metricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	if o.WebhookPort == 0 {
		o.WebhookPort = ports[1]
	}
	args := []string{
		"--kubeconfig=" + kc,
		fmt.Sprintf("--health-addr=127.0.0.1:%d", ports[2]),
		"--diagnostics-address=" + m.metricsAddr, "--insecure-diagnostics",
	}
	if o.WebhookCertDir != "" {
		args = append(args, fmt.Sprintf("--webhook-port=%d", o.WebhookPort), "--webhook-cert-dir="+o.WebhookCertDir)
	}
	args = append(args, o.Args...)
	cmdline := append(append(append([]string{}, o.Wrap...), o.Binary), args...)
	if o.MemoryLimit > 0 {
		if m.memory, err = newMemoryCgroup(o.Name, o.MemoryLimit); err != nil {
			return nil, err
		}
		limited := append(m.memory.wrap(), "env", fmt.Sprintf("GOMEMLIMIT=%d", o.MemoryLimit))
		cmdline = append(limited, cmdline...)
	}
	m.cmd = exec.Command(cmdline[0], cmdline[1:]...)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Appended to: a manager started again under the same name keeps its
	// earlier lines, as a Pod's previous logs are kept.
	logFile, err := os.OpenFile(m.logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if err := m.cmd.Start(); err != nil {
		logFile.Close()
		m.removeCgroup()
		return nil, err
	}
	go func() {
		err := m.cmd.Wait()
		logFile.Close()
		m.removeCgroup()
		m.done <- err
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := m.Scrape(); err == nil {
			return m, nil
		}
		select {
		case err := <-m.done:
			m.done <- err
			return nil, fmt.Errorf("%s manager exited: %v\n%s", o.Name, err, m.LogTail())
		default:
		}
		if time.Now().After(deadline) {
			m.Kill()
			return nil, fmt.Errorf("%s manager's metrics never answered\n%s", o.Name, m.LogTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (m *Manager) removeCgroup() {
	if m.memory != nil {
		m.memory.remove()
	}
}

// PeakMemory is the most memory the manager has used so far, as its
// container's cgroup counts it (ManagerOptions.MemoryLimit).
func (m *Manager) PeakMemory() (int64, error) {
	if m.memory == nil {
		return 0, fmt.Errorf("%s runs without a memory limit", m.Name)
	}
	return m.memory.peak()
}

// Stop ends the manager as a Deployment's rollout does (SIGTERM, then kill).
func (m *Manager) Stop() {
	m.signal(syscall.SIGTERM, 30*time.Second)
}

// Kill ends the manager at once (kill -9: a crash, a node lost).
func (m *Manager) Kill() {
	m.signal(syscall.SIGKILL, 30*time.Second)
}

func (m *Manager) signal(sig syscall.Signal, grace time.Duration) {
	select {
	case err := <-m.done:
		m.done <- err
		return
	default:
	}
	_ = m.cmd.Process.Signal(sig)
	select {
	case err := <-m.done:
		m.done <- err
	case <-time.After(grace):
		_ = m.cmd.Process.Kill()
		m.done <- <-m.done
	}
}

// Exited reports whether the manager's process has ended (killed, or exited
// on its own, e.g. after losing its leader-election lease).
func (m *Manager) Exited() bool {
	select {
	case err := <-m.done:
		m.done <- err
		return true
	default:
		return false
	}
}

// Leads reports whether the manager holds its leader-election lease (client-go's
// leader_election_master_status gauge, which controller-runtime registers).
func (m *Manager) Leads() (bool, error) {
	leads := false
	err := m.scanMetrics(func(line string) {
		if strings.HasPrefix(line, "leader_election_master_status{") {
			leads = strings.HasSuffix(line, " 1")
		}
	})
	return leads, err
}

// LogTail is the end of the manager's log, for failure messages.
func (m *Manager) LogTail() string {
	data, _ := os.ReadFile(m.logs)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// Log is the manager's whole log so far.
func (m *Manager) Log() string {
	data, _ := os.ReadFile(m.logs)
	return string(data)
}

// Scrape reads the manager's Prometheus metrics without labels (Go runtime
// and process collectors are registered by controller-runtime).
func (m *Manager) Scrape() (map[string]float64, error) {
	out := map[string]float64{}
	err := m.scanMetrics(func(line string) {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.Contains(name, "{") {
			return
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	})
	return out, err
}

// scanMetrics calls each with every sample line of the manager's metrics.
func (m *Manager) scanMetrics(each func(line string)) error {
	resp, err := http.Get("http://" + m.metricsAddr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, "#") {
			each(line)
		}
	}
	return sc.Err()
}

// freePorts returns n different ports that were free a moment ago: each
// listener stays open until all are picked, or the kernel may hand the same
// port out twice (a manager's metrics and webhook servers then collide).
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// PodNamespaceWrap is a ManagerOptions.Wrap under which a manager finds ns in
// the service-account namespace file every Pod has (in a mount namespace of
// its own: tmpfs on /run). Upstream's manager reads its leader-election
// lease's namespace only from there.
func PodNamespaceWrap(ns string) []string {
	const podFiles = `mount -t tmpfs pod-files /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && ` +
		`printf %s "$NAMESPACE" > /run/secrets/kubernetes.io/serviceaccount/namespace && exec "$@"`
	return []string{"env", "NAMESPACE=" + ns, "unshare", "--mount", "sh", "-c", podFiles, "sh"}
}

// HostsWrap is a ManagerOptions.Wrap under which a manager resolves names by
// the hosts file at hostsFile (bind-mounted on /etc/hosts in a mount
// namespace of its own), as a Pod resolves a Service's name by DNS.
func HostsWrap(hostsFile string) []string {
	const bind = `mount --bind "$HOSTS" /etc/hosts && exec "$@"`
	return []string{"env", "HOSTS=" + hostsFile, "unshare", "--mount", "sh", "-c", bind, "sh"}
}
