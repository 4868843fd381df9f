// Package host simulates the hosts of the e2e stack's infrastructure provider.
// A Lab is a private network on this machine (a bridge inside a network
// namespace of its own, reached from the host through one veth pair); each
// Host is a process tree isolated like a real machine — its own mount, UTS,
// network, PID and IPC namespaces, overlays over /etc, /var, /opt, /root... —
// that runs its bootstrap data with the format's real consumer (cloud-init,
// Ignition, the raw agent), runs real kubeadm, and keeps a simulated kubelet
// (static pods as processes, TLS bootstrap, Node registration) alive.
//
// Nothing leaves the Lab: addresses are inside a /24 no host interface uses,
// and every namespace and process dies with the process that created the Lab.
package host

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// Lab is a private network and the hosts on it.
type Lab struct {
	// Subnet is the Lab's /24; Gateway is the host side's address on it.
	Subnet  netip.Prefix
	Gateway netip.Addr

	stateDir string
	hostIf   string
	lan      *exec.Cmd // holds the network namespace with the bridge
	tools    []string  // directories put on the hosts' PATH

	mu       sync.Mutex
	hosts    map[string]*Host
	reserved map[netip.Addr]string // address -> owner (host name or endpoint key)
	nextLink int
}

// LabOptions configure a Lab.
type LabOptions struct {
	// StateDir holds the hosts' logs; it must exist.
	StateDir string
	// ToolDirs are put in front of each host's PATH: where kubeadm, etcd,
	// kube-apiserver, kube-controller-manager, kube-scheduler and ignition live.
	ToolDirs []string
}

// NewLab creates the network. Close removes it.
func NewLab(opts LabOptions) (*Lab, error) {
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	l := &Lab{
		Subnet:   subnet,
		Gateway:  subnet.Addr().Next(),
		stateDir: opts.StateDir,
		tools:    opts.ToolDirs,
		hosts:    map[string]*Host{},
		reserved: map[netip.Addr]string{},
	}
	l.hostIf = fmt.Sprintf("cabpk%d", subnet.Addr().As4()[2])
	// The LAN namespace is held by a sleeping process that dies with us; the
	// kernel then removes the bridge and every veth end with it.
	l.lan = exec.Command("sleep", "infinity")
	l.lan.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := l.lan.Start(); err != nil {
		return nil, fmt.Errorf("lab network namespace: %w", err)
	}
	lanPID := fmt.Sprint(l.lan.Process.Pid)
	steps := [][]string{
		{"nsenter", "-t", lanPID, "-n", "ip", "link", "add", "br0", "type", "bridge"},
		{"nsenter", "-t", lanPID, "-n", "ip", "link", "set", "br0", "up"},
		{"ip", "link", "add", l.hostIf, "type", "veth", "peer", "name", "uplink", "netns", lanPID},
		{"nsenter", "-t", lanPID, "-n", "ip", "link", "set", "uplink", "master", "br0", "up"},
		{"ip", "addr", "add", netip.PrefixFrom(l.Gateway, subnet.Bits()).String(), "dev", l.hostIf},
		{"ip", "link", "set", l.hostIf, "up"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// freeSubnet picks a 10.213.N.0/24 that no interface of this machine uses.
func freeSubnet() (netip.Prefix, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr").Output()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("listing addresses: %w", err)
	}
	used := string(out)
	start := os.Getpid() % 200
	for i := range 200 {
		n := 20 + (start+i)%200
		p := netip.MustParsePrefix(fmt.Sprintf("10.213.%d.0/24", n))
		if !strings.Contains(used, fmt.Sprintf(" 10.213.%d.", n)) {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("no free 10.213.N.0/24 subnet")
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Close stops every host and removes the network.
func (l *Lab) Close() {
	l.mu.Lock()
	hosts := make([]*Host, 0, len(l.hosts))
	for _, h := range l.hosts {
		hosts = append(hosts, h)
	}
	l.mu.Unlock()
	for _, h := range hosts {
		h.Stop()
	}
	if l.lan != nil && l.lan.Process != nil {
		_ = l.lan.Process.Kill()
		_ = l.lan.Wait()
	}
	// The host end normally goes with its peer; make sure.
	_ = exec.Command("ip", "link", "del", l.hostIf).Run()
}

// ReserveAddress returns the address reserved for key (e.g. a cluster's
// control-plane endpoint), reserving a free one the first time.
func (l *Lab) ReserveAddress(key string) (netip.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, owner := range l.reserved {
		if owner == key {
			return a, nil
		}
	}
	return l.allocateLocked(key)
}

// ReleaseAddress frees what ReserveAddress reserved for key.
func (l *Lab) ReleaseAddress(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, owner := range l.reserved {
		if owner == key {
			delete(l.reserved, a)
		}
	}
}

func (l *Lab) allocateLocked(owner string) (netip.Addr, error) {
	for a := l.Gateway.Next(); l.Subnet.Contains(a) && a != lastAddress(l.Subnet); a = a.Next() {
		if _, taken := l.reserved[a]; !taken {
			l.reserved[a] = owner
			return a, nil
		}
	}
	return netip.Addr{}, errors.New("the lab network is full")
}

func lastAddress(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	b[3] = 255
	return netip.AddrFrom4(b)
}

// HostSpec is what a host is started with.
type HostSpec struct {
	// Name is the key of the Lab's host table.
	Name string
	// Hostname is the host's hostname.
	Hostname string
	// AddressKey names an address reserved with ReserveAddress that the
	// host takes if no other host has it; otherwise it gets a fresh address.
	AddressKey string
	// ProviderID is what the host's metadata says its provider ID is.
	ProviderID string
	// BootDelay delays running the bootstrap data.
	BootDelay time.Duration
	// Data is the bootstrap data secret's Data (value, format, ...).
	Data map[string][]byte
}

// StartHost boots a host. It is an error if a host of that name runs.
func (l *Lab) StartHost(spec HostSpec) (*Host, error) {
	l.mu.Lock()
	if _, ok := l.hosts[spec.Name]; ok {
		l.mu.Unlock()
		return nil, fmt.Errorf("host %s already runs", spec.Name)
	}
	// A reserved address (a cluster's endpoint) is taken by the first host
	// that asks for it while it is free; others get a fresh one.
	var addr netip.Addr
	for a, owner := range l.reserved {
		if spec.AddressKey != "" && owner == spec.AddressKey {
			addr = a
		}
	}
	var err error
	if addr.IsValid() {
		l.reserved[addr] = spec.Name
	} else {
		spec.AddressKey = ""
		addr, err = l.allocateLocked(spec.Name)
	}
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	l.nextLink++
	link := fmt.Sprintf("h%d", l.nextLink)
	h := &Host{lab: l, Name: spec.Name, Address: addr, addressKey: spec.AddressKey, phase: infrav1.HostBooting}
	l.hosts[spec.Name] = h
	l.mu.Unlock()

	if err := h.start(spec, link); err != nil {
		h.Stop()
		return nil, err
	}
	return h, nil
}

// Host returns the running host of that name, if any.
func (l *Lab) Host(name string) *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hosts[name]
}

// Host is a running simulated machine.
type Host struct {
	lab        *Lab
	Name       string
	Address    netip.Addr
	addressKey string
	LogPath    string

	cmd  *exec.Cmd
	done chan struct{}

	mu       sync.Mutex
	phase    infrav1.HostPhase
	message  string
	consumer string
}

// Status is a host's progress, as the host reports it.
type Status struct {
	Phase    infrav1.HostPhase `json:"phase"`
	Message  string            `json:"message,omitempty"`
	Consumer string            `json:"consumer,omitempty"`
}

// Status returns the host's last reported status.
func (h *Host) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Status{Phase: h.phase, Message: h.message, Consumer: h.consumer}
}

func (h *Host) setStatus(s Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.phase, h.message = s.Phase, s.Message
	if s.Consumer != "" {
		h.consumer = s.Consumer
	}
}

func (h *Host) start(spec HostSpec, link string) error {
	l := h.lab
	dir := filepath.Join(l.stateDir, h.Name)
	if err := os.MkdirAll(filepath.Join(dir, "layers"), 0o700); err != nil {
		return err
	}
	h.LogPath = filepath.Join(dir, "host.log")
	logFile, err := os.Create(h.LogPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cfg := machineConfig{
		Name:       spec.Hostname,
		Address:    netip.PrefixFrom(h.Address, l.Subnet.Bits()).String(),
		Gateway:    l.Gateway.String(),
		ProviderID: spec.ProviderID,
		BootDelay:  spec.BootDelay,
		Data:       spec.Data,
		LayersDir:  filepath.Join(dir, "layers"),
		LogDir:     dir,
		ToolDirs:   l.tools,
	}
	// The bootstrap data holds keys and a token: it goes through a pipe,
	// never through arguments or the environment.
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	h.cmd = exec.Command(self)
	h.cmd.Env = append(os.Environ(), machineEnv+"=1")
	h.cmd.Stdin = bytes.NewReader(cfgJSON)
	h.cmd.Stdout, h.cmd.Stderr = logFile, logFile
	h.cmd.ExtraFiles = []*os.File{statusW}
	h.cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := h.cmd.Start(); err != nil {
		statusR.Close()
		statusW.Close()
		return fmt.Errorf("starting host %s: %w", h.Name, err)
	}
	statusW.Close()
	h.done = make(chan struct{})
	go func() {
		_ = h.cmd.Wait()
		close(h.done)
	}()
	go h.readStatus(statusR)

	pid := fmt.Sprint(h.cmd.Process.Pid)
	lanPID := fmt.Sprint(l.lan.Process.Pid)
	for _, s := range [][]string{
		{"ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", pid},
		{"ip", "link", "set", link, "netns", lanPID},
		{"nsenter", "-t", lanPID, "-n", "ip", "link", "set", link, "master", "br0", "up"},
	} {
		if err := run(s...); err != nil {
			return err
		}
	}
	return nil
}

func (h *Host) readStatus(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var s Status
		if json.Unmarshal(sc.Bytes(), &s) == nil {
			h.setStatus(s)
		}
	}
	h.mu.Lock()
	if h.phase != infrav1.HostFailed {
		h.phase, h.message = infrav1.HostFailed, "the host stopped"
	}
	h.mu.Unlock()
}

// Stop powers the host off: its PID namespace goes, and every process in it.
func (h *Host) Stop() {
	if h.cmd != nil && h.cmd.Process != nil {
		_ = h.cmd.Process.Kill()
		<-h.done
	}
	l := h.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hosts[h.Name] == h {
		delete(l.hosts, h.Name)
	}
	for a, owner := range l.reserved {
		if owner == h.Name {
			if h.addressKey != "" {
				l.reserved[a] = h.addressKey // the endpoint stays reserved for its cluster
			} else {
				delete(l.reserved, a)
			}
		}
	}
}

// Exec runs a command inside the host (its mount, UTS, network, IPC and PID
// namespaces), as logging in to the machine would, and returns its output.
func (h *Host) Exec(args ...string) ([]byte, error) {
	if h.cmd == nil || h.cmd.Process == nil {
		return nil, fmt.Errorf("host %s is not running", h.Name)
	}
	nsenter := append([]string{"-t", fmt.Sprint(h.cmd.Process.Pid), "-m", "-u", "-n", "-i", "-p", "--"}, args...)
	return exec.Command("nsenter", nsenter...).CombinedOutput()
}
