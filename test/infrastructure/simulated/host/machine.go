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

package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host/systemd"
)

// machineEnv marks a process as part of a host (see RunIfHost); its value
// says which part.
const machineEnv = "CABPK_SIMULATED_HOST"

const (
	// modeInit is the host's first process (PID 1 of its PID namespace).
	modeInit = "init"
	// modeAgent boots the host and runs its bootstrap data.
	modeAgent = "agent"
	// modeSystemctl is the systemctl shim's client.
	modeSystemctl = "systemctl"
)

// systemctlSocket is where the host's service manager takes systemctl calls.
const systemctlSocket = "/run/simulated-host/systemctl.sock"

// systemctlPath is the shim on the host's PATH, ahead of this machine's own
// systemctl (which needs a running systemd): kubeadm finds it and restarts
// the kubelet through it, as on a machine booted with systemd.
const systemctlPath = "/usr/local/sbin/systemctl"

// systemctlShim re-runs the host's executable (/proc/1/exe is the host's
// init, inside its PID namespace) as the systemctl client.
const systemctlShim = "#!/bin/sh\n" + machineEnv + "=" + modeSystemctl + " exec /proc/1/exe \"$@\"\n"

// serviceManager is what a host asks of its service manager, which package
// systemd stands in for.
type serviceManager interface {
	// Enable marks units to start at boot; EnablePresets does what a
	// preset file says, and returns the units it enabled.
	Enable(names ...string)
	EnablePresets(path string) ([]string, error)
	// StartEnabled starts every enabled unit, as a boot does.
	StartEnabled()
	// Start starts a unit; the channel closes when a oneshot unit finished.
	Start(name string) (<-chan struct{}, error)
	// Status is a unit's state, how often it started and failed, and the
	// end of its output when it last failed.
	Status(name string) (state systemd.State, starts, failures int, lastError string)
	// Result waits for a oneshot unit to finish and returns how it ended.
	Result(ctx context.Context, name string) error
	// Serve answers systemctl calls until the listener closes.
	Serve(l net.Listener)
}

// machineConfig is what the Lab hands a host through its stdin.
type machineConfig struct {
	Name       string            `json:"name"`
	InstanceID string            `json:"instanceID"`
	Address    string            `json:"address"` // CIDR
	Gateway    string            `json:"gateway"`
	BootDelay  time.Duration     `json:"bootDelay"`
	Data       map[string][]byte `json:"data"`
	LayersDir  string            `json:"layersDir"`
	LogDir     string            `json:"logDir"`
	// Tools are the commands the image has in /usr/local/bin (kubelet,
	// kubeadm, kubectl, ignition), as paths of this machine.
	Tools map[string]string `json:"tools"`
	// Cgroup names the host's cgroup in each of Cgroups.
	Cgroup  string            `json:"cgroup"`
	Cgroups []cgroupHierarchy `json:"cgroups"`
	// ContainerdDir is the host's containerd root on this machine's disk,
	// made from ContainerdSeed.
	ContainerdDir  string `json:"containerdDir"`
	ContainerdSeed string `json:"containerdSeed"`
	PauseImage     string `json:"pauseImage"`
}

// RunIfHost turns this process into a part of a simulated host when the Lab
// (or the host itself) started it as one, and never returns then. Programs
// that create a Lab (the e2e tests' TestMain, the demo) call it first thing:
// a host is this same executable re-run inside fresh namespaces.
func RunIfHost() {
	switch os.Getenv(machineEnv) {
	case "":
		return
	case modeInit:
		os.Exit(runInit())
	case modeSystemctl:
		os.Exit(systemd.Systemctl(systemctlSocket, os.Args[1:]))
	default:
		os.Exit(runHost())
	}
}

// runInit is the host's PID 1: it moves into the host's cgroup, starts the
// agent in a cgroup namespace rooted there, and reaps every process that
// ends up with it (containerd's shims, kubeadm's children) until the agent
// exits, which ends the host.
func runInit() int {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "init: reading the host configuration: %v\n", err)
		return 1
	}
	var cfg machineConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "init: reading the host configuration: %v\n", err)
		return 1
	}
	if err := joinCgroup(cfg.Cgroups, cfg.Cgroup); err != nil {
		fmt.Fprintf(os.Stderr, "init: %v\n", err)
		return 1
	}
	agent := exec.Command("/proc/self/exe")
	agent.Env = append(os.Environ(), machineEnv+"="+modeAgent)
	agent.Stdin = strings.NewReader(string(raw))
	agent.Stdout, agent.Stderr = os.Stdout, os.Stderr
	agent.ExtraFiles = []*os.File{os.NewFile(3, "status")}
	agent.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWCGROUP}
	if err := agent.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "init: starting the host agent: %v\n", err)
		return 1
	}
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 1
		}
		if pid == agent.Process.Pid {
			if ws.Exited() {
				return ws.ExitStatus()
			}
			return 1
		}
	}
}

// machine is the host's side: its configuration, log and status channel.
type machine struct {
	cfg          machineConfig
	log          *log.Logger
	out          io.Writer // the host log, for the consumers' output
	status       *os.File
	logDir       string // the Lab's log directory, reached through an open descriptor
	logDirHandle *os.File
	services     serviceManager
}

func (m *machine) report(phase infrav1.HostPhase, message, consumer string) {
	m.log.Printf("%s: %s", phase, message)
	b, err := json.Marshal(Status{Phase: phase, Message: message, Consumer: consumer})
	if err != nil {
		m.log.Printf("reporting the status: %v", err)
		return
	}
	_, _ = m.status.Write(append(b, '\n'))
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
	go m.watchKubelet(ctx)

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
		m.report(infrav1.HostFailed, err.Error()+m.kubeletTrouble(), consumer.name())
		select {}
	}
	if _, err := os.Stat(rawv1.SuccessSentinel); err != nil {
		m.report(infrav1.HostFailed, consumer.name()+" finished but did not write "+rawv1.SuccessSentinel, consumer.name())
		select {}
	}
	m.report(infrav1.HostBootstrapped, consumer.name()+" ran the bootstrap data; kubeadm succeeded", consumer.name())
	// The host keeps running its services until powered off.
	select {}
}

// kubeletTrouble says why the kubelet keeps failing since kubeadm configured
// it, in the kubelet's own words, or nothing when it does not.
func (m *machine) kubeletTrouble() string {
	if _, err := os.Stat(kubeletConfigYAML); err != nil {
		return ""
	}
	state, starts, failures, lastError := m.services.Status(kubeletUnitName)
	if state == systemd.StateActive || failures == 0 || starts < 2 {
		return ""
	}
	return fmt.Sprintf("; kubelet.service is %s, failed %d times, last: %s", state, failures, lastError)
}

// watchKubelet reports a kubelet that keeps failing once kubeadm configured
// it (a bad flag in the data): the host's status then carries the kubelet's
// error while kubeadm still waits for it.
func (m *machine) watchKubelet(ctx context.Context) {
	var baseline = -1
	reported := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(3 * time.Second):
		}
		if _, err := os.Stat(kubeletConfigYAML); err != nil {
			continue
		}
		state, _, failures, lastError := m.services.Status(kubeletUnitName)
		if baseline < 0 {
			baseline = failures // failures before kubeadm configured it are expected
			continue
		}
		if state != systemd.StateActive && failures-baseline >= 2 && lastError != reported {
			reported = lastError
			m.report(infrav1.HostBootstrapping, fmt.Sprintf("kubelet.service keeps failing (%d times since kubeadm configured it): %s", failures-baseline, lastError), "")
		}
	}
}

// boot isolates the host's files, gives it its own view of the cgroups,
// joins it to the Lab's network, installs the node's image and starts the
// services it enables (containerd, the kubelet).
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
	if err := mountCgroups(m.cfg.Cgroups); err != nil {
		return err
	}
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
	os.Setenv("PATH", systemd.DefaultPath)
	os.Setenv("HOME", "/root")
	os.Unsetenv(machineEnv)
	if err := m.joinNetwork(addr); err != nil {
		return err
	}
	if err := m.installImage(); err != nil {
		return fmt.Errorf("installing the node's image: %w", err)
	}
	return m.startServices()
}

// startServices starts the service manager with the image's enabled units
// and waits for the container runtime, as a boot reaches multi-user.target
// before cloud-init's final stage runs.
func (m *machine) startServices() error {
	m.services = systemd.New(m.log.Printf, m.logFile)
	if err := os.MkdirAll(filepath.Dir(systemctlSocket), 0o755); err != nil {
		return err
	}
	l, err := net.Listen("unix", systemctlSocket)
	if err != nil {
		return err
	}
	go m.services.Serve(l)
	m.services.Enable(containerdUnitName, kubeletUnitName)
	m.services.StartEnabled()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		state, _, _, lastError := m.services.Status(containerdUnitName)
		if state == systemd.StateActive {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd.service is %s after 60s: %s (see containerd.log)", state, lastError)
		}
	}
	return waitForCRI(context.Background(), 60*time.Second)
}

// isolateFiles gives the host its own writable view of the machine: a root
// directory of its own, and every directory a consumer or kubeadm writes to
// is an overlay (reads fall through to this machine's files, writes stay in
// the host's memory) or a fresh tmpfs; containerd's root is the host's own
// directory on this machine's disk, started from the images' seed.
func (m *machine) isolateFiles() error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	layers := m.cfg.LayersDir
	if err := syscall.Mount("tmpfs", layers, "tmpfs", 0, "mode=0700"); err != nil {
		return err
	}
	if err := ownRoot(filepath.Join(layers, "root")); err != nil {
		return fmt.Errorf("the host's root directory: %w", err)
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
	if err := copySeed(m.cfg.ContainerdSeed, m.cfg.ContainerdDir); err != nil {
		return fmt.Errorf("containerd's root from the images' seed: %w", err)
	}
	if err := os.MkdirAll(containerdRoot, 0o711); err != nil {
		return err
	}
	if err := syscall.Mount(m.cfg.ContainerdDir, containerdRoot, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("containerd's root: %w", err)
	}
	if err := m.installTools(); err != nil {
		return err
	}
	for _, d := range []string{"/run", "/tmp"} {
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=1777"); err != nil {
			return fmt.Errorf("tmpfs over %s: %w", d, err)
		}
	}
	// What the kubelet, etcd and the CNI plugins keep: in memory, gone with
	// the host. The node's CNI configuration starts empty (this machine's
	// own, podman's, must not give pods another network).
	for _, d := range []string{"/var/lib/kubelet", "/var/lib/etcd", "/var/log/pods", "/var/log/containers", cniConfigDir, "/var/lib/cni"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("tmpfs over %s: %w", d, err)
		}
	}
	// A /proc of the host's own PID namespace.
	return syscall.Mount("proc", "/proc", "proc", 0, "")
}

// ownRoot makes root, a fresh tmpfs, the host's "/": it holds this
// machine's top-level directories (bind mounts, isolated further by the
// caller) and top-level links, so that what bootstrap data writes to "/"
// itself (a script, a marker) stays in the host, as on a machine of its own.
// root is unbindable: the bind of the directory that holds it must not copy
// it into itself.
func ownRoot(root string) error {
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	if err := syscall.Mount("", root, "", syscall.MS_UNBINDABLE, ""); err != nil {
		return err
	}
	entries, err := os.ReadDir("/")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := placeInRoot(root, e); err != nil {
			return fmt.Errorf("/%s: %w", e.Name(), err)
		}
	}
	// pivot_root(".", ".") stacks the old root on top of the new one at "/";
	// detaching it uncovers the new root, whose binds are mounts of their own.
	if err := os.Chdir(root); err != nil {
		return err
	}
	if err := syscall.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := syscall.Unmount(".", syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the machine's root: %w", err)
	}
	return os.Chdir("/")
}

// placeInRoot puts one of this machine's top-level entries into root: a
// directory or file as a bind mount, a link as the same link.
func placeInRoot(root string, e os.DirEntry) error {
	src, dst := "/"+e.Name(), filepath.Join(root, e.Name())
	switch {
	case e.Type()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case e.IsDir():
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		return syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, "")
	case e.Type().IsRegular():
		if err := os.WriteFile(dst, nil, 0o644); err != nil {
			return err
		}
		return syscall.Mount(src, dst, "", syscall.MS_BIND, "")
	}
	return nil // sockets and devices do not belong at the top
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
