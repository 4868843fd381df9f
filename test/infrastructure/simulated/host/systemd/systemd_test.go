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

package systemd

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestExpandCommandAsSystemd(t *testing.T) {
	env := []string{"ARGS=--a=1 --b=2", "EMPTY=", "ONE=x y"}
	for _, tc := range []struct {
		line string
		want []string
	}{
		// $VAR alone is split into words; an empty one disappears.
		{"/usr/local/bin/kubelet $ARGS $EMPTY --c", []string{"/usr/local/bin/kubelet", "--a=1", "--b=2", "--c"}},
		// ${VAR} stays one word.
		{"/bin/echo ${ONE}", []string{"/bin/echo", "x y"}},
		{`/bin/sh -c "echo a  b"`, []string{"/bin/sh", "-c", "echo a  b"}},
		{"/bin/echo pre${ONE}post", []string{"/bin/echo", "prex ypost"}},
	} {
		if got := expandCommand(tc.line, env); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("expandCommand(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// unitTree points the service manager at a directory of unit files.
func unitTree(t *testing.T, units map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range units {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := unitDirs
	unitDirs = []string{dir}
	t.Cleanup(func() { unitDirs = old })
}

func testSystemd(t *testing.T) *Manager {
	logs := t.TempDir()
	return New(t.Logf, func(name string) (*os.File, error) {
		return os.Create(filepath.Join(logs, name))
	})
}

func waitState(t *testing.T, s *Manager, name string, cond func(State, int, int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, starts, failures, last := s.Status(name)
		if cond(st, starts, failures) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %s, %d starts, %d failures, last error %q", name, st, starts, failures, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A failing service with Restart=always is started again after RestartSec,
// its environment from the drop-in and an EnvironmentFile, and its last
// error kept.
func TestServiceRestartsAndKeepsItsError(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "flags.env")
	if err := os.WriteFile(envFile, []byte(`FLAGS="--from-file"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unitTree(t, map[string]string{
		"flaky.service": "[Service]\nExecStart=/bin/false\nRestart=always\nRestartSec=0.05\n",
		"flaky.service.d/10-override.conf": "[Service]\nEnvironment=\"GREETING=no such flag\"\nEnvironmentFile=-" + envFile +
			"\nEnvironmentFile=-/nonexistent\nExecStart=\nExecStart=/bin/sh -c \"echo E1204 01:02:03.000004 42 run.go:72] $GREETING $0 >&2; exit 3\" $FLAGS\n",
	})
	s := testSystemd(t)
	if _, err := s.Start("flaky"); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "flaky.service", func(_ State, starts, failures int) bool { return starts >= 3 && failures >= 3 })
	_, _, _, last := s.Status("flaky") //nolint:dogsled // only the last error matters here
	if last != "no such flag --from-file" {
		t.Errorf("last error %q, want the service's last line without its klog header", last)
	}
	s.Stop("flaky")
	if st, _, _, _ := s.Status("flaky"); st != StateInactive {
		t.Errorf("stopped: %s", st)
	}
}

// systemctl start on a service waiting to restart starts it at once, as
// kubeadm's `systemctl restart kubelet` does on a real machine.
func TestStartDuringRestartWaitStartsAtOnce(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "configured")
	unitTree(t, map[string]string{
		"kubelet.service": "[Service]\nExecStart=/bin/sh -c \"test -e " + marker + " && exec sleep 60\"\nRestart=always\nRestartSec=1h\n",
	})
	s := testSystemd(t)
	if _, err := s.Start("kubelet"); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "kubelet.service", func(_ State, _, failures int) bool { return failures == 1 })
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := s.systemctl([]string{"start", "kubelet"}); code != 0 {
		t.Fatalf("systemctl start: %d %s", code, out)
	}
	waitState(t, s, "kubelet.service", func(st State, starts, _ int) bool { return st == StateActive && starts == 2 })
	if out, code := s.systemctl([]string{"is-active", "kubelet"}); code != 0 || strings.TrimSpace(out) != "active" {
		t.Errorf("is-active: %d %q", code, out)
	}
	s.Stop("kubelet")
}

// A oneshot service's result is what its commands returned; a condition
// that does not hold leaves it unstarted.
func TestOneshotResultAndConditions(t *testing.T) {
	done := filepath.Join(t.TempDir(), "done")
	unitTree(t, map[string]string{
		"ok.service":      "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStartPre=-/bin/false\nExecStart=/bin/touch " + done + "\n",
		"fails.service":   "[Service]\nType=oneshot\nExecStart=/bin/sh -c \"exit 7\"\n",
		"skipped.service": "[Unit]\nConditionPathExists=!" + done + "\n[Service]\nType=oneshot\nExecStart=/bin/false\n",
	})
	s := testSystemd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, u := range []string{"ok", "fails"} {
		if _, err := s.Start(u); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Result(ctx, "ok"); err != nil {
		t.Errorf("ok.service: %v", err)
	}
	if st, _, _, _ := s.Status("ok"); st != StateActive {
		t.Errorf("ok.service with RemainAfterExit: %s", st)
	}
	if err := s.Result(ctx, "fails"); err == nil || !strings.Contains(err.Error(), "exit status 7") {
		t.Errorf("fails.service: %v", err)
	}
	if _, err := s.Start("skipped"); err != nil {
		t.Fatal(err)
	}
	if err := s.Result(ctx, "skipped"); err != nil {
		t.Errorf("skipped.service: %v", err)
	}
	if _, starts, _, _ := s.Status("skipped"); starts != 0 {
		t.Errorf("skipped.service ran although its condition did not hold")
	}
	if out, code := s.systemctl([]string{"status", "nonexistent"}); code != 4 || !strings.Contains(out, "could not be found") {
		t.Errorf("status of a missing unit: %d %q", code, out)
	}
}

// TestServicesStartInTheirWorkingDirectory: a service's commands start in
// "/" as systemd's system services do, or in its WorkingDirectory=;
// bootstrap data runs scripts by paths relative to "/".
func TestServicesStartInTheirWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	unitTree(t, map[string]string{
		"default.service": "[Service]\nType=oneshot\nExecStart=/bin/sh -c \"pwd > " + dir + "/default\"\n",
		"set.service":     "[Service]\nType=oneshot\nWorkingDirectory=" + elsewhere + "\nExecStart=/bin/sh -c \"pwd > " + dir + "/set\"\n",
	})
	s := testSystemd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for unit, want := range map[string]string{"default": "/", "set": elsewhere} {
		if _, err := s.Start(unit); err != nil {
			t.Fatal(err)
		}
		if err := s.Result(ctx, unit); err != nil {
			t.Fatalf("%s.service: %v", unit, err)
		}
		got, err := os.ReadFile(filepath.Join(dir, unit))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("%s.service ran in %q, want %q", unit, strings.TrimSpace(string(got)), want)
		}
	}
}
