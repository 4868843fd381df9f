package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// machineEnv marks a process as a host (see RunIfHost).
const machineEnv = "CABPK_SIMULATED_HOST"

// machineConfig is what the Lab hands a host through its stdin.
type machineConfig struct {
	Name       string            `json:"name"`
	Address    string            `json:"address"` // CIDR
	Gateway    string            `json:"gateway"`
	ProviderID string            `json:"providerID"`
	BootDelay  time.Duration     `json:"bootDelay"`
	Data       map[string][]byte `json:"data"`
	LayersDir  string            `json:"layersDir"`
	LogDir     string            `json:"logDir"`
	ToolDirs   []string          `json:"toolDirs"`
}

// RunIfHost turns this process into a simulated host when the Lab started it
// as one, and never returns then. Programs that create a Lab (the e2e tests'
// TestMain, the demo) call it first thing: a host is this same executable
// re-run inside fresh namespaces.
func RunIfHost() {
	if os.Getenv(machineEnv) == "" {
		return
	}
	os.Exit(runHost())
}

// machine is the host's side: its configuration, log and status channel.
type machine struct {
	cfg          machineConfig
	log          *log.Logger
	out          io.Writer // the host log, for the consumers' output
	status       *os.File
	logDir       string // the Lab's log directory, reached through an open descriptor
	logDirHandle *os.File
}

func (m *machine) report(phase infrav1.HostPhase, message, consumer string) {
	b, _ := json.Marshal(Status{Phase: phase, Message: message, Consumer: consumer})
	_, _ = m.status.Write(append(b, '\n'))
	m.log.Printf("%s: %s", phase, message)
}

func runHost() int {
	m := &machine{log: log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds), out: os.Stderr, status: os.NewFile(3, "status")}
	if err := json.NewDecoder(os.Stdin).Decode(&m.cfg); err != nil {
		m.report(infrav1.HostFailed, "reading the host configuration: "+err.Error(), "")
		return 1
	}
	if err := m.boot(); err != nil {
		m.report(infrav1.HostFailed, err.Error(), "")
		return 1
	}
	ctx := context.Background()
	k := &kubelet{m: m, providerID: m.cfg.ProviderID, address: strings.Split(m.cfg.Address, "/")[0]}
	go k.run(ctx)

	if m.cfg.BootDelay > 0 {
		m.report(infrav1.HostBooting, fmt.Sprintf("a slow machine: waiting %s before running the bootstrap data", m.cfg.BootDelay), "")
		time.Sleep(m.cfg.BootDelay)
	}
	format := string(m.cfg.Data["format"])
	consumer, err := consumerFor(format)
	if err != nil {
		m.report(infrav1.HostFailed, err.Error(), "")
		select {}
	}
	m.report(infrav1.HostBootstrapping, "running the bootstrap data with "+consumer.name(), consumer.name())
	if err := consumer.run(ctx, m); err != nil {
		m.report(infrav1.HostFailed, err.Error(), consumer.name())
		select {}
	}
	if _, err := os.Stat(rawv1.SuccessSentinel); err != nil {
		m.report(infrav1.HostFailed, consumer.name()+" finished but did not write "+rawv1.SuccessSentinel, consumer.name())
		select {}
	}
	m.report(infrav1.HostBootstrapped, consumer.name()+" ran the bootstrap data; kubeadm succeeded", consumer.name())
	// The host keeps running its kubelet and static pods until powered off.
	select {}
}

// boot isolates the host's files and joins it to the Lab's network.
func (m *machine) boot() error {
	// The Lab's log directory is hidden by the fresh /tmp below; keep a handle.
	dir, err := os.Open(m.cfg.LogDir)
	if err != nil {
		return err
	}
	if err := m.isolateFiles(); err != nil {
		return fmt.Errorf("isolating the host's files: %w", err)
	}
	m.logDirHandle = dir // kept referenced: a collected *os.File closes its descriptor
	m.logDir = fmt.Sprintf("/proc/self/fd/%d", dir.Fd())
	if err := syscall.Sethostname([]byte(m.cfg.Name)); err != nil {
		return err
	}
	addr := netip.MustParsePrefix(m.cfg.Address)
	if err := os.WriteFile("/etc/hostname", []byte(m.cfg.Name+"\n"), 0o644); err != nil {
		return err
	}
	hosts, _ := os.ReadFile("/etc/hosts")
	hosts = append(hosts, []byte(fmt.Sprintf("%s %s\n", addr.Addr(), m.cfg.Name))...)
	if err := os.WriteFile("/etc/hosts", hosts, 0o644); err != nil {
		return err
	}
	os.Setenv("PATH", strings.Join(append(m.cfg.ToolDirs, os.Getenv("PATH")), ":"))
	os.Setenv("HOME", "/root")
	os.Unsetenv(machineEnv)
	return m.joinNetwork(addr)
}

// isolateFiles gives the host its own writable view of the machine: every
// directory a consumer or kubeadm writes to is an overlay (reads fall through
// to this machine's files, writes stay in the host's memory) or a fresh tmpfs.
func (m *machine) isolateFiles() error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	layers := m.cfg.LayersDir
	if err := syscall.Mount("tmpfs", layers, "tmpfs", 0, "mode=0700"); err != nil {
		return err
	}
	for _, d := range []string{"/etc", "/var", "/opt", "/home", "/root", "/srv", "/usr/local"} {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		upper, work := filepath.Join(layers, d, "upper"), filepath.Join(layers, d, "work")
		for _, p := range []string{upper, work} {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", d, upper, work)
		if err := syscall.Mount("overlay", d, "overlay", 0, opts); err != nil {
			return fmt.Errorf("overlay over %s: %w", d, err)
		}
	}
	for _, d := range []string{"/run", "/tmp"} {
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=1777"); err != nil {
			return fmt.Errorf("tmpfs over %s: %w", d, err)
		}
	}
	// A /proc of the host's own PID namespace.
	return syscall.Mount("proc", "/proc", "proc", 0, "")
}

func (m *machine) joinNetwork(addr netip.Prefix) error {
	if err := run("ip", "link", "set", "lo", "up"); err != nil {
		return err
	}
	// The Lab moves our end of the veth pair in after starting us.
	deadline := time.Now().Add(30 * time.Second)
	for exec.Command("ip", "link", "show", "eth0").Run() != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("no network interface after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, s := range [][]string{
		{"ip", "addr", "add", addr.String(), "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", "default", "via", m.cfg.Gateway},
	} {
		if err := run(s...); err != nil {
			return err
		}
	}
	return nil
}

// logFile opens a file in the Lab's log directory for appending.
func (m *machine) logFile(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(m.logDir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}
