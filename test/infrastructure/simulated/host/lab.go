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

// Package host simulates the hosts of the e2e stack's infrastructure provider.
// A Lab is a private network on this machine (a bridge inside a network
// namespace of its own, reached from the host through one veth pair); each
// Host is a process tree isolated like a real machine — its own mount, UTS,
// network, PID, IPC and cgroup namespaces, a root directory of its own with
// overlays over /etc, /var, /opt, /root... — that boots a node's image (containerd, runc, the real kubelet
// under a stand-in for systemd), runs its bootstrap data with the format's
// real consumer (cloud-init, Ignition, the raw agent) and real kubeadm, and
// keeps its kubelet and containers running.
//
// Nothing leaves the Lab: addresses are inside a /24 no host interface uses,
// every namespace and process dies with the process that created the Lab, and
// a stopped host's cgroups and containerd root are removed.
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// CgroupPrefix starts the name of every host's cgroup on this machine.
const CgroupPrefix = "cabpk-lab"

// Lab is a private network and the hosts on it.
type Lab struct {
	// Subnet is the Lab's /24; Gateway is the host side's address on it.
	Subnet  netip.Prefix
	Gateway netip.Addr

	stateDir string
	hostIf   string
	lan      *exec.Cmd // holds the network namespace with the bridge
	opts     LabOptions
	cgroups  []cgroupHierarchy
	// cgroupPrefix starts the name of every host's cgroup.
	cgroupPrefix string

	// limits are the machine's limits the Lab raised, restored by Close.
	limits []raisedLimit

	mu        sync.Mutex
	hosts     map[string]*Host
	reserved  map[netip.Addr]string // address -> owner (host name or endpoint key)
	balancers map[string]*LoadBalancer
	// images are the machine images besides the node image, by name;
	// imagesMu guards them apart from mu, as making one takes a while.
	imagesMu sync.Mutex
	images   map[string]*machineImage
	// releases are the node releases hosts boot, the default first.
	releases []*labRelease
	nextLink int
}

// LabOptions configure a Lab.
type LabOptions struct {
	// StateDir holds the hosts' logs and containerd roots; it must exist,
	// on a file system that takes overlayfs upper directories (not tmpfs
	// or overlayfs).
	StateDir string
	// Releases are the Kubernetes releases hosts boot, one per version;
	// a host whose spec names no version boots the first.
	Releases []NodeRelease
}

// NewLab creates the network. Close removes it.
func NewLab(opts LabOptions) (*Lab, error) {
	if err := checkReleases(opts.Releases); err != nil {
		return nil, err
	}
	if err := checkFreeDisk(opts.StateDir); err != nil {
		return nil, err
	}
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	cgroups, err := machineCgroups()
	if err != nil {
		return nil, err
	}
	removeStaleCgroups(cgroups)
	l := &Lab{
		Subnet:       subnet,
		Gateway:      subnet.Addr().Next(),
		stateDir:     opts.StateDir,
		opts:         opts,
		cgroups:      cgroups,
		cgroupPrefix: fmt.Sprintf("%s%d-", CgroupPrefix, subnet.Addr().As4()[2]),
		hosts:        map[string]*Host{},
		reserved:     map[netip.Addr]string{},
		balancers:    map[string]*LoadBalancer{},
		images:       map[string]*machineImage{},
	}
	l.hostIf = fmt.Sprintf("cabpk%d", subnet.Addr().As4()[2])
	if l.limits, err = raiseLimits(); err != nil {
		restoreLimits(l.limits)
		return nil, err
	}
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
	if err := l.prepareReleases(); err != nil {
		l.Close()
		return nil, err
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
	l.mu.Lock()
	balancers := l.balancers
	l.balancers = map[string]*LoadBalancer{}
	l.mu.Unlock()
	for _, lb := range balancers {
		lb.close()
	}
	_ = l.removeMachineImages()
	_ = os.RemoveAll(filepath.Join(l.stateDir, releasesDir))
	if l.lan != nil && l.lan.Process != nil {
		_ = l.lan.Process.Kill()
		_ = l.lan.Wait()
	}
	// The host end normally goes with its peer; make sure.
	_ = exec.Command("ip", "link", "del", l.hostIf).Run()
	restoreLimits(l.limits)
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
	Name string `json:"name"`
	// Hostname is the host's hostname.
	Hostname string `json:"hostname"`
	// LoadBalancer, when set, is the key of a load balancer the host is a
	// backend of while it runs (its cluster's control-plane endpoint).
	LoadBalancer string `json:"loadBalancer,omitempty"`
	// InstanceID is the host's instance-id in its metadata.
	InstanceID string `json:"instanceID"`
	// Image names the machine image the host boots (AddMachineImage); the
	// node image when empty.
	Image string `json:"image,omitempty"`
	// KubernetesVersion picks the node release the host boots (its
	// kubelet, kubeadm and images); the Lab's first when empty.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// BootDelay delays running the bootstrap data.
	BootDelay time.Duration `json:"bootDelay,omitempty"`
	// Data is the bootstrap data secret's Data (value, format, ...).
	Data map[string][]byte `json:"data"`
}

// StartHost boots a host. It is an error if a host of that name runs.
func (l *Lab) StartHost(spec HostSpec) (*Host, error) {
	// Before mu: a machine image's store for another release takes a
	// while to make, and other hosts keep booting meanwhile.
	release, err := l.releaseFor(spec)
	if err != nil {
		return nil, err
	}
	store, err := l.storeFor(spec, release)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if _, ok := l.hosts[spec.Name]; ok {
		l.mu.Unlock()
		return nil, fmt.Errorf("host %s already runs", spec.Name)
	}
	var balancer *LoadBalancer
	if spec.LoadBalancer != "" {
		if balancer = l.balancers[spec.LoadBalancer]; balancer == nil {
			l.mu.Unlock()
			return nil, fmt.Errorf("host %s: no load balancer %s", spec.Name, spec.LoadBalancer)
		}
	}
	addr, err := l.allocateLocked(spec.Name)
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	l.nextLink++
	link := fmt.Sprintf("h%d", l.nextLink)
	h := &Host{lab: l, Name: spec.Name, Address: addr, phase: infrav1.HostBooting,
		cgroup: l.cgroupPrefix + link, balancer: balancer}
	l.hosts[spec.Name] = h
	l.mu.Unlock()

	if err := h.start(spec, link, release, store); err != nil {
		h.Stop()
		return nil, err
	}
	if h.balancer != nil {
		h.balancer.add(h)
	}
	return h, nil
}

// StateDir holds the hosts' directories (Dir).
func (l *Lab) StateDir() string { return l.stateDir }

// Dir is where the host of that name in a Lab's state directory keeps its
// logs, which outlive it, and while it runs its containerd root and layers.
// A process without the Lab, such as another process of a parallel test
// suite, finds a host's logs there.
func Dir(stateDir, name string) string { return filepath.Join(stateDir, name) }

// pidFile, in a running host's directory, holds its first process's PID.
const pidFile = "pid"

// ExecIn is Host.Exec for a process without the Lab (another process of a
// parallel test suite): it finds the running host of that name in the Lab's
// state directory.
func ExecIn(stateDir, name string, args ...string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(Dir(stateDir, name), pidFile))
	if err != nil {
		return nil, fmt.Errorf("host %s is not running: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	return execInPID(pid, nil, args...)
}

// Host returns the running host of that name, if any.
func (l *Lab) Host(name string) *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hosts[name]
}

// Host is a running simulated machine.
type Host struct {
	lab      *Lab
	Name     string
	Address  netip.Addr
	balancer *LoadBalancer

	// cgroup names the host's cgroup; dir holds its logs and containerd root.
	cgroup string
	dir    string

	cmd  *exec.Cmd
	done chan struct{}
	// cleaned closes once Stop removed what the host left on this machine.
	cleaned  chan struct{}
	cleanErr error

	mu         sync.Mutex
	phase      infrav1.HostPhase
	message    string
	consumer   string
	podNetwork *PodNetwork
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

// start boots the host with the release's commands and a copy of store, its
// machine image's containerd store.
func (h *Host) start(spec HostSpec, link string, release *labRelease, store string) error {
	l := h.lab
	dir := Dir(l.stateDir, h.Name)
	h.dir = dir
	if err := os.MkdirAll(filepath.Join(dir, "layers"), 0o700); err != nil {
		return err
	}
	if err := createCgroup(l.cgroups, h.cgroup); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "host.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cfg := machineConfig{
		Name:           spec.Hostname,
		InstanceID:     spec.InstanceID,
		Address:        netip.PrefixFrom(h.Address, l.Subnet.Bits()).String(),
		Gateway:        l.Gateway.String(),
		BootDelay:      spec.BootDelay,
		Data:           spec.Data,
		LayersDir:      filepath.Join(dir, "layers"),
		LogDir:         dir,
		Tools:          release.Tools,
		Cgroup:         h.cgroup,
		Cgroups:        l.cgroups,
		ContainerdDir:  filepath.Join(dir, "containerd"),
		ContainerdSeed: store,
		PauseImage:     release.PauseImage,
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
	h.cmd.Dir = "/" // a machine boots in its root; consumers run commands from there
	h.cmd.Env = append(os.Environ(), machineEnv+"="+modeInit)
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
	if err := os.WriteFile(filepath.Join(h.dir, pidFile), []byte(pid), 0o644); err != nil {
		return err
	}
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

// Stop powers the host off: its PID namespace goes, and every process in it
// (containerd, its shims, the containers, the kubelet); then its cgroups and
// its containerd root are removed. Stopping a stopped host waits for that.
func (h *Host) Stop() {
	h.mu.Lock()
	first := h.cleaned == nil
	if first {
		h.cleaned = make(chan struct{})
	}
	cleaned := h.cleaned
	h.mu.Unlock()
	if !first {
		<-cleaned
		return
	}
	defer close(cleaned)
	if h.balancer != nil {
		h.balancer.remove(h)
	}
	if h.cmd != nil && h.cmd.Process != nil {
		_ = h.cmd.Process.Kill()
		<-h.done
	}
	if h.dir != "" {
		_ = os.Remove(filepath.Join(h.dir, pidFile))
	}
	l := h.lab
	var errs []error
	if h.cgroup != "" {
		errs = append(errs, removeCgroup(l.cgroups, h.cgroup))
	}
	if h.dir != "" {
		// The host's mounts went with its mount namespace; what stays on
		// this machine's disk is containerd's root.
		errs = append(errs, os.RemoveAll(filepath.Join(h.dir, "containerd")), os.RemoveAll(filepath.Join(h.dir, "layers")))
	}
	h.cleanErr = errors.Join(errs...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hosts[h.Name] == h {
		delete(l.hosts, h.Name)
	}
	for a, owner := range l.reserved {
		if owner == h.Name {
			delete(l.reserved, a)
		}
	}
}

// Exec runs a command inside the host (its mount, UTS, network, IPC and PID
// namespaces), as logging in to the machine would, and returns its output.
func (h *Host) Exec(args ...string) ([]byte, error) {
	return h.execWithInput(nil, args...)
}

// Leftovers lists what a stopped host left on this machine: cgroups, its
// containerd root, its end of the lab's network, and Stop's own errors.
func (h *Host) Leftovers() []string {
	var left []string
	if h.cleanErr != nil {
		left = append(left, h.cleanErr.Error())
	}
	left = append(left, leftoverCgroups(h.lab.cgroups, h.cgroup)...)
	for _, d := range []string{"containerd", "layers"} {
		if _, err := os.Stat(filepath.Join(h.dir, d)); err == nil {
			left = append(left, filepath.Join(h.dir, d))
		}
	}
	return left
}

// Leftovers lists what a closed Lab left on this machine: host cgroups,
// network interfaces, mounts or containerd roots under its state directory.
func (l *Lab) Leftovers() []string {
	left := leftoverCgroups(l.cgroups, l.cgroupPrefix)
	if err := exec.Command("ip", "link", "show", l.hostIf).Run(); err == nil {
		left = append(left, "network interface "+l.hostIf)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], l.stateDir) {
				left = append(left, "mount "+f[4])
			}
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(l.stateDir, "*", "*", "containerd"))
	left = append(left, dirs...)
	return left
}
