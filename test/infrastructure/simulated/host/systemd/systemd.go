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

// Package systemd stands in for a simulated host's service manager: the
// unit files a node's packages install and Ignition writes, started at boot
// when enabled, supervised with their Restart= policy, and driven by
// systemctl, whose calls reach it over a socket.
package systemd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/unit"
)

// Manager stands in for the machine's service manager, for what a node needs
// of it: the unit files the packages install (containerd's, kubelet's with
// kubeadm's drop-in) and those Ignition writes, started at boot when enabled,
// supervised with their Restart= policy, and driven by `systemctl` (kubeadm
// restarts the kubelet through it). Unit semantics kept: drop-ins,
// Environment=/EnvironmentFile=, $VAR and ${VAR} in command lines, the
// ExecStart prefixes, Type=simple/exec/notify/oneshot, RemainAfterExit=,
// Restart=/RestartSec=, ConditionPathExists=. Each service's output goes to
// <name>.log in the host's log directory, as journald would keep it.
type Manager struct {
	log     func(format string, args ...any)
	logFile func(name string) (*os.File, error)

	mu       sync.Mutex
	services map[string]*service
	enabled  map[string]bool
}

// unitDirs are searched in systemd's order: local configuration first.
var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

// DefaultPath is the PATH systemd gives services (a host's boot takes it
// too).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// State is what `systemctl is-active` prints.
type State string

const (
	StateInactive   State = "inactive"
	StateActivating State = "activating"
	StateActive     State = "active"
	StateFailed     State = "failed"
)

// service is one unit and its supervision.
type service struct {
	name    string
	oneshot bool
	state   State
	// starts counts how often its main process started; failures how often
	// it ended in failure; lastError is the end of its output when it did.
	starts, failures int
	lastError        string
	// stop ends the current run (no restart); done closes when it has.
	stop context.CancelFunc
	done chan struct{}
	// finished closes when a oneshot run completed, or another service's
	// main process first started.
	finished chan struct{}
	result   error
	// kick ends a wait before an automatic restart.
	kick chan struct{}
}

// New is a service manager that logs its own doings with logf and writes
// each service's output to the file logFile opens for the service's name.
func New(logf func(string, ...any), logFile func(string) (*os.File, error)) *Manager {
	return &Manager{log: logf, logFile: logFile, services: map[string]*service{}, enabled: map[string]bool{}}
}

// Enable marks units to start at boot (what `systemctl enable` or a preset does).
func (s *Manager) Enable(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.enabled[n] = true
	}
}

// EnablePresets enables the units a preset file enables (Ignition writes one).
func (s *Manager) EnablePresets(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var names []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "enable" {
			names = append(names, f[1])
		}
	}
	s.Enable(names...)
	return names, nil
}

// unitDefinition is a unit file with its drop-ins, parsed.
type unitDefinition struct {
	opts []*unit.UnitOption
}

func (u unitDefinition) values(section, name string) []string {
	var v []string
	for _, o := range u.opts {
		if o.Section == section && o.Name == name {
			if o.Value == "" && strings.HasPrefix(name, "Exec") {
				v = nil // an empty assignment resets the list
				continue
			}
			v = append(v, o.Value)
		}
	}
	return v
}

func (u unitDefinition) value(section, name, def string) string {
	v := u.values(section, name)
	if len(v) == 0 {
		return def
	}
	return v[len(v)-1]
}

// load finds a unit and its drop-ins.
func loadUnit(name string) (unitDefinition, error) {
	var main string
	for _, d := range unitDirs {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			main = filepath.Join(d, name)
			break
		}
	}
	if main == "" {
		return unitDefinition{}, fmt.Errorf("Unit %s could not be found.", name) //nolint:revive // systemctl's own words
	}
	paths := []string{main}
	dropIns := map[string]string{}
	for i := len(unitDirs) - 1; i >= 0; i-- { // earlier directories override later ones
		matches, _ := filepath.Glob(filepath.Join(unitDirs[i], name+".d", "*.conf"))
		for _, m := range matches {
			dropIns[filepath.Base(m)] = m
		}
	}
	keys := make([]string, 0, len(dropIns))
	for k := range dropIns {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		paths = append(paths, dropIns[k])
	}
	var u unitDefinition
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return u, err
		}
		opts, err := unit.DeserializeOptions(f)
		f.Close()
		if err != nil {
			return u, fmt.Errorf("%s: %w", p, err)
		}
		u.opts = append(u.opts, opts...)
	}
	return u, nil
}

// StartEnabled starts every enabled service, in name order; it does not wait.
func (s *Manager) StartEnabled() {
	s.mu.Lock()
	var names []string
	for n := range s.enabled {
		if strings.HasSuffix(n, ".service") {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		if _, err := s.Start(n); err != nil {
			s.log("systemd: %s: %v", n, err)
		}
	}
}

// Start starts a service unless it runs; the returned channel closes when a
// oneshot service finished (at once for others).
func (s *Manager) Start(name string) (<-chan struct{}, error) {
	name = unitName(name)
	u, err := loadUnit(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sv := s.services[name]; sv != nil && sv.state != StateInactive && sv.state != StateFailed {
		// Waiting to restart: systemctl start restarts it now.
		select {
		case sv.kick <- struct{}{}:
		default:
		}
		return sv.finished, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	sv := &service{name: name, oneshot: u.value("Service", "Type", "simple") == "oneshot", state: StateActivating,
		stop: cancel, done: make(chan struct{}), finished: make(chan struct{}), kick: make(chan struct{}, 1)}
	if old := s.services[name]; old != nil {
		sv.starts, sv.failures, sv.lastError = old.starts, old.failures, old.lastError
	}
	s.services[name] = sv
	go s.supervise(ctx, sv, u)
	return sv.finished, nil
}

// Stop stops a service and waits until its processes are gone.
func (s *Manager) Stop(name string) {
	s.mu.Lock()
	sv := s.services[unitName(name)]
	s.mu.Unlock()
	if sv == nil {
		return
	}
	sv.stop()
	<-sv.done
}

// Restart stops and starts a service.
func (s *Manager) Restart(name string) error {
	s.Stop(name)
	_, err := s.Start(name)
	return err
}

// Status returns a service's state, how often it started and failed, and
// the end of its output when it last failed.
func (s *Manager) Status(name string) (state State, starts, failures int, lastError string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv := s.services[unitName(name)]
	if sv == nil {
		return StateInactive, 0, 0, ""
	}
	return sv.state, sv.starts, sv.failures, sv.lastError
}

// Result waits for a oneshot service and returns how it ended; for other
// services it waits until their main process started.
func (s *Manager) Result(ctx context.Context, name string) error {
	s.mu.Lock()
	sv := s.services[unitName(name)]
	s.mu.Unlock()
	if sv == nil {
		return fmt.Errorf("%s was not started", name)
	}
	select {
	case <-sv.finished:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sv.oneshot {
		return nil
	}
	return sv.result
}

func (s *Manager) setState(sv *service, st State) {
	s.mu.Lock()
	sv.state = st
	s.mu.Unlock()
}

func unitName(n string) string {
	if !strings.Contains(n, ".") {
		return n + ".service"
	}
	return n
}

// supervise runs a service until it is stopped or ends for good.
func (s *Manager) supervise(ctx context.Context, sv *service, u unitDefinition) {
	defer close(sv.done)
	finishedOnce := sync.OnceFunc(func() { close(sv.finished) })
	defer finishedOnce()
	typ := u.value("Service", "Type", "simple")
	restart := u.value("Service", "Restart", "no")
	restartDelay := parseSeconds(u.value("Service", "RestartSec", "0.1"))
	out, err := s.logFile(strings.TrimSuffix(sv.name, ".service") + ".log")
	if err != nil {
		s.log("systemd: %s: %v", sv.name, err)
		out = nil
	}
	if out != nil {
		defer out.Close()
	}
	for {
		if ok, why := conditionsMet(u); !ok {
			s.log("systemd: %s: condition %s not met, not started", sv.name, why)
			s.setState(sv, StateInactive)
			return
		}
		tail := &tailBuffer{max: 2048}
		var w io.Writer = tail
		if out != nil {
			w = io.MultiWriter(out, tail)
		}
		err := s.runOnce(ctx, sv, u, typ, w, finishedOnce)
		s.mu.Lock()
		sv.result = err
		if err != nil && ctx.Err() == nil {
			sv.failures++
			sv.lastError = tail.lastLine()
		}
		s.mu.Unlock()
		if ctx.Err() != nil {
			s.setState(sv, StateInactive)
			return
		}
		again := restart == "always" || (restart == "on-failure" && err != nil)
		if !again {
			switch {
			case err != nil:
				s.log("systemd: %s failed: %v", sv.name, err)
				s.setState(sv, StateFailed)
			case typ == "oneshot" && u.value("Service", "RemainAfterExit", "no") == "yes":
				s.setState(sv, StateActive)
			default:
				s.setState(sv, StateInactive)
			}
			return
		}
		s.setState(sv, StateActivating) // "activating (auto-restart)"
		if typ == "oneshot" {
			finishedOnce() // its first run's result is what Result returns
		}
		select {
		case <-ctx.Done():
			s.setState(sv, StateInactive)
			return
		case <-sv.kick:
		case <-time.After(restartDelay):
		}
	}
}

// workingDirectory is where a service's commands start: its
// WorkingDirectory= ("~" being root's home: services run as root here), or
// "/", systemd's default for system services.
func workingDirectory(u unitDefinition) string {
	dir := strings.TrimPrefix(u.value("Service", "WorkingDirectory", "/"), "-")
	if dir == "~" {
		return "/root"
	}
	return dir
}

// runOnce runs ExecStartPre, ExecStart and ExecStartPost once; it calls
// finished when a service other than a oneshot has started its main process.
func (s *Manager) runOnce(ctx context.Context, sv *service, u unitDefinition, typ string, out io.Writer, finished func()) error {
	env, err := serviceEnv(u)
	if err != nil {
		return err
	}
	run := func(line string, wait bool) (*exec.Cmd, error) {
		ignoreFailure := false
		for len(line) > 0 && strings.ContainsRune("-@+!:", rune(line[0])) {
			ignoreFailure = ignoreFailure || line[0] == '-'
			line = line[1:]
		}
		argv := expandCommand(line, env)
		if len(argv) == 0 {
			return nil, nil
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, out, out
		cmd.Dir = workingDirectory(u)
		// Its own process group, so that stopping it reaches its children
		// (KillMode=control-group, as near as a process tree gets).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			if ignoreFailure {
				return nil, nil
			}
			return nil, err
		}
		if !wait {
			return cmd, nil
		}
		err := waitOrStop(ctx, cmd)
		if err != nil && !ignoreFailure {
			return nil, fmt.Errorf("%s: %w", argv[0], err)
		}
		return nil, nil
	}
	for _, l := range u.values("Service", "ExecStartPre") {
		if _, err := run(l, true); err != nil {
			return err
		}
	}
	starts := u.values("Service", "ExecStart")
	if len(starts) == 0 {
		return errors.New("no ExecStart=")
	}
	s.mu.Lock()
	sv.starts++
	s.mu.Unlock()
	if typ == "oneshot" {
		for _, l := range starts {
			if _, err := run(l, true); err != nil {
				return err
			}
		}
		for _, l := range u.values("Service", "ExecStartPost") {
			if _, err := run(l, true); err != nil {
				return err
			}
		}
		// supervise says a oneshot finished once its result and state are set.
		return nil
	}
	var notify *net.UnixConn
	if typ == "notify" {
		if notify, err = notifySocket(sv.name); err != nil {
			return err
		}
		defer notify.Close()
		env = append(env, "NOTIFY_SOCKET="+notify.LocalAddr().String())
	}
	main, err := run(starts[0], false)
	if err != nil || main == nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- main.Wait() }()
	if notify != nil {
		ready := make(chan struct{})
		go waitReady(notify, ready)
		select {
		case <-ready:
		case err := <-exited:
			return exitError(err)
		case <-ctx.Done():
			stopGroup(main, exited)
			return nil
		}
	}
	s.setState(sv, StateActive)
	finished()
	for _, l := range u.values("Service", "ExecStartPost") {
		if _, err := run(l, true); err != nil {
			stopGroup(main, exited)
			return err
		}
	}
	select {
	case err := <-exited:
		return exitError(err)
	case <-ctx.Done():
		stopGroup(main, exited)
		return nil
	}
}

func exitError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("main process exited: %w", err)
}

// waitOrStop waits for cmd, stopping its process group when ctx ends.
func waitOrStop(ctx context.Context, cmd *exec.Cmd) error {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-ctx.Done():
		stopGroup(cmd, exited)
		return ctx.Err()
	}
}

// stopGroup sends SIGTERM to a process group, SIGKILL after 10s, and waits.
func stopGroup(cmd *exec.Cmd, exited <-chan error) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	// Their exit statuses say only that they were stopped.
	select {
	case <-exited: //nolint:errcheck // as above
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited //nolint:errcheck // as above
	}
}

// notifySocket is a service's sd_notify socket.
func notifySocket(name string) (*net.UnixConn, error) {
	dir := "/run/systemd/notify"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	_ = os.Remove(path)
	return net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
}

func waitReady(c *net.UnixConn, ready chan<- struct{}) {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		for _, l := range strings.Split(string(buf[:n]), "\n") {
			if l == "READY=1" {
				close(ready)
				return
			}
		}
	}
}

func conditionsMet(u unitDefinition) (bool, string) {
	for _, c := range u.values("Unit", "ConditionPathExists") {
		path, negate := strings.CutPrefix(c, "!")
		_, err := os.Stat(path)
		if (err == nil) == negate {
			return false, "ConditionPathExists=" + c
		}
	}
	return true, ""
}

// serviceEnv is the environment systemd gives a service: its own PATH, then
// Environment= and EnvironmentFile= in order (later assignments win).
func serviceEnv(u unitDefinition) ([]string, error) {
	vars := map[string]string{}
	order := []string{}
	set := func(kv string) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return
		}
		if _, seen := vars[k]; !seen {
			order = append(order, k)
		}
		vars[k] = v
	}
	set("PATH=" + DefaultPath)
	set("LANG=C.UTF-8")
	for _, o := range u.opts {
		if o.Section != "Service" {
			continue
		}
		switch o.Name {
		case "Environment":
			for _, kv := range splitQuoted(o.Value) {
				set(kv)
			}
		case "EnvironmentFile":
			path, optional := strings.CutPrefix(o.Value, "-")
			b, err := os.ReadFile(path)
			if err != nil {
				if optional {
					continue
				}
				return nil, err
			}
			for _, line := range strings.Split(string(b), "\n") {
				line = strings.TrimSpace(line)
				if line == "" || line[0] == '#' || line[0] == ';' {
					continue
				}
				k, v, ok := strings.Cut(line, "=")
				if !ok {
					continue
				}
				v = strings.TrimSpace(v)
				if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
					v = v[1 : len(v)-1]
				}
				set(strings.TrimSpace(k) + "=" + v)
			}
		}
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

// splitQuoted splits a unit value into words, honouring "..." and '...'.
func splitQuoted(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// expandCommand splits a command line as systemd does: a word that is
// exactly $NAME becomes the variable's value split at whitespace (none if
// empty); ${NAME} inside a word is replaced in place.
func expandCommand(line string, env []string) []string {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var argv []string
	for _, w := range splitQuoted(line) {
		if strings.HasPrefix(w, "$") && !strings.HasPrefix(w, "${") && isVarName(w[1:]) {
			argv = append(argv, strings.Fields(vars[w[1:]])...)
			continue
		}
		argv = append(argv, os.Expand(w, func(k string) string {
			if !isVarName(k) {
				return "$" + k // $0, $$: not systemd's to expand
			}
			return vars[k]
		}))
	}
	return argv
}

func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// parseSeconds reads a systemd time span ("10", "10s", "500ms", "1min").
func parseSeconds(v string) time.Duration {
	if d, err := time.ParseDuration(strings.Replace(v, "min", "m", 1)); err == nil {
		return d
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(f * float64(time.Second))
	}
	return 100 * time.Millisecond
}

// tailBuffer keeps the end of a service's output.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// klogHeader is the prefix klog puts before a message (E1204 03:53:53.000798 206 run.go:72] ).
var klogHeader = regexp.MustCompile(`^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]+\] `)

// lastLine returns the last non-empty line, without a klog header: what a
// program that exits on an error says last is that error.
func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	return klogHeader.ReplaceAllString(strings.TrimSpace(lines[len(lines)-1]), "")
}
