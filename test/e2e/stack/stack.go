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

// Package stack starts the whole e2e stack on this machine: a management API
// server (envtest) with Cluster API's and this provider's CRDs and webhooks,
// Cluster API v1.14's core reconcilers and the simulated infrastructure
// provider in this process, this provider's manager as its own process (the
// binary that ships, with its real flags), and a Lab of simulated hosts that
// run the bootstrap data. The e2e tests and the demo share it; a test can
// start more management clusters over the same Lab. An e2e package's
// TestMain is Run: it starts the stack, runs the tests, stops it and checks
// that nothing is left on this machine.
package stack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/cloud"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// Options configure a Stack.
type Options struct {
	// StateDir receives logs and kubeconfigs; it must exist.
	StateDir string
	// ManagerArgs are extra flags for this provider's manager (feature gates,
	// --bootstrap-token-ttl).
	ManagerArgs []string
	// Progress, when set, receives one line per start-up step.
	Progress io.Writer
	// MachineImages are machine images the Lab gets besides its node image,
	// by name, with the images each adds to the node image's store
	// (SimulatedMachine spec.image names one).
	MachineImages map[string][]host.ImageArchive
	// OtherReleases are Kubernetes releases hosts can boot besides the
	// default one: a Machine's spec.version picks its host's.
	OtherReleases []testbin.Release
	// RuntimeSDK runs Cluster API's core and KubeadmControlPlane managers
	// as their binaries with the Runtime SDK and in-place updates on,
	// calling this provider's extension by its Service's name (see
	// runtimesdk.go); this provider's manager then serves on port 443.
	RuntimeSDK bool
	// KubernetesBinaries serves the default release's kubeadm and kubelet
	// to the Lab's hosts and names them to this provider's manager, for
	// Kubernetes versions in place (see binaries.go).
	KubernetesBinaries bool
}

// Stack is a Lab of simulated hosts and the management cluster that runs
// their workload clusters; a test can start more management clusters over
// the same Lab (StartManagement).
type Stack struct {
	*Management
	Lab *host.Lab
	// Cloud serves the Lab's API; every management cluster's simulated
	// provider asks it for hosts and load balancers.
	Cloud *cloud.Server

	opts     Options
	binaries *http.Server
	mu       sync.Mutex
	others   []*Management
}

// releaseTools are the commands of a Kubernetes release the hosts' image has
// in /usr/local/bin; hostTools the others it has there.
var (
	releaseTools = []string{testbin.Kubelet, testbin.Kubeadm, testbin.Kubectl}
	hostTools    = []string{testbin.Ignition}
)

// hostPackages are what the hosts' image has from Debian's packages.
var hostPackages = []string{testbin.Containerd, testbin.Runc, testbin.CloudInit}

// sharedImages are the images of a release that nodes of another release run
// during an upgrade: the DaemonSet's kube-proxy and the CoreDNS Deployment
// in a rollout, and the control plane's static Pods too when each machine
// upgrades in place. A site's nodes would pull them from its registry.
var sharedImages = []string{"kube-proxy", "coredns", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// labOptions finds what the hosts are made of: the packages, and for each
// release (the default first) its tools and node images with their
// containerd seed.
func labOptions(stateDir string, others []testbin.Release) (host.LabOptions, error) {
	opts := host.LabOptions{StateDir: stateDir}
	for _, t := range hostPackages {
		if _, err := testbin.Path(t); err != nil {
			return opts, err
		}
	}
	for _, r := range append([]testbin.Release{testbin.DefaultRelease()}, others...) {
		nr, err := nodeRelease(r)
		if err != nil {
			return opts, err
		}
		opts.Releases = append(opts.Releases, nr)
	}
	return opts, nil
}

// nodeRelease is what hosts of a release boot: the release's commands beside
// the image's others, and the release's node images.
func nodeRelease(r testbin.Release) (host.NodeRelease, error) {
	nr := host.NodeRelease{KubernetesVersion: r.Kubernetes, Tools: map[string]string{}}
	for _, t := range releaseTools {
		p, err := r.Path(t)
		if err != nil {
			return nr, err
		}
		nr.Tools[t] = p
	}
	for _, t := range hostTools {
		p, err := testbin.Path(t)
		if err != nil {
			return nr, err
		}
		nr.Tools[t] = p
	}
	images, err := r.LoadNodeImages()
	if err != nil {
		return nr, err
	}
	pause, err := images.Image("pause")
	if err != nil {
		return nr, err
	}
	nr.ContainerdSeed, nr.PauseImage = images.ContainerdSeed(), pause.Ref
	for _, component := range sharedImages {
		img, err := images.Image(component)
		if err != nil {
			return nr, err
		}
		nr.Shared = append(nr.Shared, host.ImageArchive{Ref: img.Ref, Path: filepath.Join(images.Dir, img.File)})
	}
	return nr, nil
}

// Start brings the stack up. Stop takes it down.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	s := &Stack{opts: opts}
	if err := s.start(ctx); err != nil {
		s.Stop() // whatever did start
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context) error {
	labOpts, err := labOptions(filepath.Join(s.opts.StateDir, "hosts"), s.opts.OtherReleases)
	if err != nil {
		return err
	}
	s.progress("building the manager binary (bootstrap/kubeadm/cmd/manager)")
	managerBin := filepath.Join(s.opts.StateDir, "manager")
	if err := process.Build(managerBin, "./bootstrap/kubeadm/cmd/manager"); err != nil {
		return err
	}
	s.progress("building the simulated provider's manager (test/infrastructure/simulated/cmd/manager)")
	simulatedBin := filepath.Join(s.opts.StateDir, "simulated-manager")
	if err := process.BuildIn(repodir.TestModule(), simulatedBin, "./infrastructure/simulated/cmd/manager"); err != nil {
		return err
	}
	s.progress("creating the simulated hosts' network")
	if err := os.MkdirAll(labOpts.StateDir, 0o755); err != nil {
		return err
	}
	if s.Lab, err = host.NewLab(labOpts); err != nil {
		return err
	}
	for name, archives := range s.opts.MachineImages {
		s.progress("making the machine image " + name)
		if err := s.Lab.AddMachineImage(name, archives); err != nil {
			return err
		}
	}
	if s.Cloud, err = cloud.Serve(s.Lab); err != nil {
		return err
	}
	managerArgs := s.opts.ManagerArgs
	if s.opts.KubernetesBinaries {
		s.progress("serving the Kubernetes binaries nodes upgrade to in place")
		source, err := s.serveKubernetesBinaries()
		if err != nil {
			return err
		}
		managerArgs = append(slices.Clone(managerArgs), "--node-update-kubernetes-binaries="+source)
	}
	s.Management = &Management{
		Name: "management", dir: s.opts.StateDir, binDir: s.opts.StateDir, managerBin: managerBin, simulatedBin: simulatedBin,
		lab: s.Lab, cloudURL: s.Cloud.URL, progress: s.progress, first: true, runtimeSDK: s.opts.RuntimeSDK,
	}
	return s.Management.start(ctx, managerArgs)
}

// StateDir holds the stack's logs and kubeconfigs.
func (s *Stack) StateDir() string { return s.opts.StateDir }

// StartManagement starts another management cluster over the stack's Lab,
// with this provider's manager run with managerArgs; its logs go to a
// directory of its name in the state directory. The stack stops it, if the
// test does not first.
func (s *Stack) StartManagement(ctx context.Context, name string, managerArgs ...string) (*Management, error) {
	dir := filepath.Join(s.opts.StateDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := &Management{
		Name: name, dir: dir, binDir: s.opts.StateDir, managerBin: s.managerBin, simulatedBin: s.simulatedBin,
		lab: s.Lab, cloudURL: s.Cloud.URL,
		progress: func(msg string) { s.progress(name + ": " + msg) },
	}
	s.mu.Lock()
	s.others = append(s.others, m)
	s.mu.Unlock()
	if err := m.start(ctx, managerArgs); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

func (s *Stack) progress(msg string) {
	if s.opts.Progress != nil {
		fmt.Fprintf(s.opts.Progress, "%s  %s\n", time.Now().Format("15:04:05"), msg)
	}
}

// Stop stops everything the stack started: hosts, the management clusters.
func (s *Stack) Stop() {
	if s.Cloud != nil {
		_ = s.Cloud.Close()
	}
	if s.binaries != nil {
		_ = s.binaries.Close()
	}
	if s.Lab != nil {
		s.Lab.Close()
	}
	s.mu.Lock()
	others := s.others
	s.mu.Unlock()
	for _, m := range others {
		m.Stop()
	}
	if s.Management != nil {
		s.Management.Stop()
	}
}
