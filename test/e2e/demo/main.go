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

// Command demo follows Cluster API's quick start with this provider on
// simulated hosts: a management cluster (a one-node kubeadm cluster on a
// lab host, where the quick start has kind), clusterctl init with every
// provider from its image, a workload cluster generated from the
// ClusterClass flavor "formats" in the format BOOTSTRAP_FORMAT says, and
// its nodes and pods. It prints each command as a user types it, so they
// can be repeated in a second terminal, and keeps everything running until
// Ctrl-C. `make demo` runs it (as root).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

func main() {
	host.RunIfHost()
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

// settings are what make passes the demo from its variables.
type settings struct {
	format               bootstrapv1.Format
	controlPlaneReplicas int
}

func readSettings() (settings, error) {
	s := settings{format: bootstrapv1.CloudConfig, controlPlaneReplicas: 1}
	if v := os.Getenv("BOOTSTRAP_FORMAT"); v != "" {
		s.format = bootstrapv1.Format(v)
		if !slices.Contains(bootstrapv1.Formats, s.format) {
			return s, fmt.Errorf("BOOTSTRAP_FORMAT=%q: want one of %v", v, bootstrapv1.Formats)
		}
	}
	if v := os.Getenv("CONTROL_PLANE_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return s, fmt.Errorf("CONTROL_PLANE_REPLICAS=%q: want a replica count of at least 1", v)
		}
		s.controlPlaneReplicas = n
	}
	return s, nil
}

func run() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: the simulated hosts use mount, network and PID namespaces")
	}
	set, err := readSettings()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Stopped through make (its parent) as well as by Ctrl-C: a SIGTERM when
	// the parent goes, so the shutdown below still runs.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return fmt.Errorf("asking to be told when the parent exits: %w", err)
	}

	stateDir, err := os.MkdirTemp("", "cabpk-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	p := progress{began: time.Now()}
	p.sayf("logs, kubeconfigs and the clusterctl configuration in %s (removed on exit)", stateDir)

	p.sayf("building this provider's and the simulated provider's images")
	rel, err := releases.Build(filepath.Join(stateDir, "releases"))
	if err != nil {
		return err
	}
	s, err := stack.Start(ctx, stack.Options{
		StateDir:      stateDir,
		ManagerArgs:   []string{"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true"},
		Progress:      os.Stdout,
		MachineImages: map[string][]host.ImageArchive{releases.MachineImage: rel.Images},
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("demo: stopping hosts, controllers, manager and API server...")
		s.Stop()
		if left := s.Lab.Leftovers(); len(left) > 0 {
			fmt.Printf("demo: stopped, but these were left behind:\n  %s\n", strings.Join(left, "\n  "))
			return
		}
		fmt.Println("demo: stopped; no process, mount, cgroup, network interface or containerd root is left behind")
	}()

	mgmt, err := bootManagementCluster(ctx, s, stateDir, &p)
	if err != nil {
		return unlessInterrupted(ctx, err)
	}
	q, err := newQuickStart(stateDir, mgmt, rel, s.Cloud.URL, set)
	if err != nil {
		return err
	}
	if err := q.run(ctx, &p); err != nil {
		return unlessInterrupted(ctx, err)
	}
	<-ctx.Done()
	return nil
}

// unlessInterrupted is err, or nothing once Ctrl-C cut a step short: the
// step's error then only says it was stopped.
func unlessInterrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil //nolint:nilerr // stopping is not a failure
	}
	return err
}

// progress prints the demo's own lines with the time since it began.
type progress struct{ began time.Time }

func (p *progress) sayf(format string, args ...any) {
	fmt.Printf("demo [%s]: %s\n", p.elapsed(), fmt.Sprintf(format, args...))
}

func (p *progress) elapsed() time.Duration { return time.Since(p.began).Round(time.Second) }
