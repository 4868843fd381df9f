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
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"
)

// descendants lists the processes below pid (children are listed per
// thread: a Go program forks from any of its threads).
func descendants(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, task := range tasks {
		data, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(data)) {
			child, _ := strconv.Atoi(f)
			out = append(out, child)
			out = append(out, descendants(child)...)
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer two goroutines can write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	// A zombie has ended; only its parent has not collected it yet.
	return err == nil && !strings.Contains(string(data), ") Z ")
}

// TestParentKilledStopsEverything plays `make run` being killed: the process
// that started runlocal dies with SIGKILL, and runlocal still stops the
// manager, the API server and etcd.
func TestParentKilledStopsEverything(t *testing.T) {
	dir := t.TempDir()
	if err := process.BuildIn(repodir.ToolsModule(), filepath.Join(dir, "runlocal"), "./runlocal"); err != nil {
		t.Fatal(err)
	}
	if err := process.Build(filepath.Join(dir, "manager"), "./bootstrap/kubeadm/cmd/manager"); err != nil {
		t.Fatal(err)
	}
	// bash stands for make: it runs runlocal as its child.
	parent := exec.Command("bash", "-c", `"$@"; echo runlocal exited`, "bash", filepath.Join(dir, "runlocal"), filepath.Join(dir, "manager"),
		fmt.Sprintf("--health-addr=127.0.0.1:%d", process.FreePort(t)), fmt.Sprintf("--diagnostics-address=127.0.0.1:%d", process.FreePort(t)))
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// What runlocal and the manager said, for a failure's message.
	var output syncBuffer
	parent.Stderr = &output
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = output.Write(append(sc.Bytes(), '\n'))
			if strings.Contains(sc.Text(), "local API server running") {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(90 * time.Second):
		_ = parent.Process.Kill()
		t.Fatalf("runlocal never started the API server; its output:\n%s", output.String())
	}
	time.Sleep(3 * time.Second) // the manager is starting too
	procs := descendants(parent.Process.Pid)
	if len(procs) < 4 { // runlocal, kube-apiserver, etcd, manager
		t.Fatalf("expected runlocal, etcd, kube-apiserver and the manager below the parent, found %v; their output:\n%s", procs, output.String())
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline := time.Now().Add(60 * time.Second)
	for _, pid := range procs {
		for alive(pid) {
			if time.Now().After(deadline) {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				t.Fatalf("process %d (%s) still runs after its parent was killed", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
