//go:build e2e

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

package capi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/capi/flavors"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/workload"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// inPlaceLabel marks the specs that update machines in place: Cluster API's
// managers then run as their binaries with the Runtime SDK, and the hosts
// boot with this provider's image, which the suite then builds (see
// inPlaceSpec).
const inPlaceLabel = "in-place"

// Cluster API's in-place update spec, unchanged: three control-plane
// machines and a worker of a ClusterClass cluster take five changes of the
// class's files variable without being replaced. Not in raw: its file,
// /tmp/test, is not a kubeadm patch, and admission refuses it. This provider's extension
// answers Cluster API's hooks; its ExtensionConfig names the provider's
// webhook Service, as an operator's would. The nodes are watched while the
// spec runs (nodeWatch), and afterwards a fresh worker of the last spec is
// compared with the updated one, file by file.
var _ = Describe("Cluster API's in-place update", inPlaceSpec("ClusterInPlaceUpdate", flavors.AnyFileFormats), Label("ClusterClass"), func() {
	inFormats(flavors.AnyFileFormats, func(f bootstrapv1.Format) {
		var watch *nodeWatch
		capie2e.ClusterInPlaceUpdateSpec(ctx, func() capie2e.ClusterInPlaceUpdateSpecInput {
			return capie2e.ClusterInPlaceUpdateSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                ptr.To(flavors.FlavorName(flavors.InPlaceFlavor, f)),
				// One per format: the formats' specs may run side by side,
				// each scoped to its own namespace.
				ExtensionConfigName:       "in-place-update-" + string(f),
				ExtensionServiceNamespace: stack.ProviderNamespace,
				ExtensionServiceName:      stack.ExtensionServiceName,
				// Upstream's values: no control-plane machine is added,
				// and the worker is updated, not replaced.
				ClusterctlVariables: map[string]string{
					"KUBEADM_CONTROL_PLANE_MAX_SURGE": "0",
					"MD_MAX_SURGE":                    "1",
					"MD_MAX_UNAVAILABLE":              "1",
				},
				PostNamespaceCreated: func(proxy framework.ClusterProxy, namespace string) {
					watch = watchNodes(proxy.GetClient(), namespace)
				},
			}
		})
		// Before the spec's AfterEach deletes the cluster.
		JustAfterEach(func() {
			if watch == nil {
				return
			}
			watch.stop()
			if CurrentSpecReport().Failed() {
				return
			}
			watch.expectEveryNodeFollowed()
			AddReportEntry(InPlaceEntry, watch.result())
			expectFreshWorkerAlike(watch.c, watch.namespace)
		})
	})
})

// nodeWatch follows, while the spec runs, the files variable of the
// namespace's Cluster and, on every machine's host, the file it names: each
// host must go through the variable's values in order and end on the last.
type nodeWatch struct {
	c         client.Client
	namespace string
	cancel    context.CancelFunc
	done      chan struct{}

	mu sync.Mutex
	// values are the variable's files in the order the Cluster had them,
	// and since when it had each.
	values []classFile
	since  []time.Time
	// seen are, by host, the file contents read there in order, with no
	// repeats, and when each was first read.
	seen   map[string][]string
	seenAt map[string][]time.Time
}

// classFile is one entry of the ClusterClass's files variable.
type classFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func watchNodes(c client.Client, namespace string) *nodeWatch {
	wctx, cancel := context.WithCancel(ctx)
	w := &nodeWatch{c: c, namespace: namespace, cancel: cancel, done: make(chan struct{}),
		seen: map[string][]string{}, seenAt: map[string][]time.Time{}}
	go func() {
		defer GinkgoRecover()
		defer close(w.done)
		for wctx.Err() == nil {
			w.look(wctx)
			select {
			case <-wctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return w
}

func (w *nodeWatch) stop() {
	w.cancel()
	<-w.done
}

// look reads the variable once and the file on every running host.
func (w *nodeWatch) look(ctx context.Context) {
	clusters := &clusterv1.ClusterList{}
	if err := w.c.List(ctx, clusters, client.InNamespace(w.namespace)); err != nil || len(clusters.Items) != 1 {
		return
	}
	file, ok := filesVariable(clusters.Items[0])
	if !ok {
		return
	}
	w.mu.Lock()
	if len(w.values) == 0 || w.values[len(w.values)-1] != file {
		w.values, w.since = append(w.values, file), append(w.since, time.Now())
	}
	w.mu.Unlock()
	machines := &clusterv1.MachineList{}
	if err := w.c.List(ctx, machines, client.InNamespace(w.namespace)); err != nil {
		return
	}
	for _, m := range machines.Items {
		key := hostKey(m)
		out, err := host.ExecIn(labDir, key, "cat", file.Path)
		if err != nil {
			continue // not booted yet, or no file yet
		}
		w.mu.Lock()
		if s := w.seen[key]; len(s) == 0 || s[len(s)-1] != string(out) {
			w.seen[key], w.seenAt[key] = append(s, string(out)), append(w.seenAt[key], time.Now())
		}
		w.mu.Unlock()
	}
}

// expectEveryNodeFollowed checks what the watch saw: every host that had
// the file had only the variable's values, in the order the Cluster had
// them, and has the last one.
func (w *nodeWatch) expectEveryNodeFollowed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	Expect(w.values).NotTo(BeEmpty(), "the Cluster never had the files variable")
	var order []string
	for _, v := range w.values {
		order = append(order, v.Content)
	}
	machines := &clusterv1.MachineList{}
	Expect(w.c.List(ctx, machines, client.InNamespace(w.namespace))).To(Succeed())
	Expect(machines.Items).NotTo(BeEmpty())
	last := order[len(order)-1]
	for _, m := range machines.Items {
		seen := w.seen[hostKey(m)]
		Expect(seen).NotTo(BeEmpty(), "host of %s never had the file", m.Name)
		Expect(seen[len(seen)-1]).To(Equal(last), "host of %s", m.Name)
		Expect(inOrder(seen, order)).To(BeTrue(), "host of %s had %q, the Cluster %q", m.Name, seen, order)
		fmt.Fprintf(GinkgoWriter, "%s: the host went through %d of the %d contents\n", m.Name, len(seen), len(order))
	}
}

// InPlaceEntry is the report entry of each in-place update spec, which
// make e2e-capi-in-place-results tabulates.
const InPlaceEntry = "in-place"

// InPlaceResult is what the watch measured: how many changes of the
// variable, on how many machines, and the fastest and slowest time from a
// change to the last host having it (changes every host had, to within
// the watch's one-second polls).
type InPlaceResult struct {
	Updates        int     `json:"updates"`
	Machines       int     `json:"machines"`
	FastestSeconds float64 `json:"fastestSeconds"`
	SlowestSeconds float64 `json:"slowestSeconds"`
}

func (w *nodeWatch) result() InPlaceResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := InPlaceResult{Updates: len(w.values), Machines: len(w.seen)}
	for i, v := range w.values {
		var last time.Time
		for key, contents := range w.seen {
			j := slices.Index(contents, v.Content)
			if j < 0 {
				last = time.Time{}
				break
			}
			if at := w.seenAt[key][j]; at.After(last) {
				last = at
			}
		}
		if last.IsZero() {
			continue
		}
		d := last.Sub(w.since[i]).Seconds()
		if r.FastestSeconds == 0 || d < r.FastestSeconds {
			r.FastestSeconds = d
		}
		r.SlowestSeconds = max(r.SlowestSeconds, d)
	}
	return r
}

// inOrder says whether seen are some of order's values in order's order.
func inOrder(seen, order []string) bool {
	i := 0
	for _, s := range seen {
		j := slices.Index(order[i:], s)
		if j < 0 {
			return false
		}
		i += j
	}
	return true
}

// filesVariable is the one file of the Cluster's files variable.
func filesVariable(c clusterv1.Cluster) (classFile, bool) {
	for _, v := range c.Spec.Topology.Variables {
		if v.Name != objects.FilesVariable {
			continue
		}
		var files []classFile
		if err := json.Unmarshal(v.Value.Raw, &files); err != nil || len(files) != 1 {
			return classFile{}, false
		}
		return files[0], true
	}
	return classFile{}, false
}

// inPlaceWorkerFiles are what an in-place update writes on a worker and a
// fresh worker of the same spec has alike.
var inPlaceWorkerFiles = []string{"/var/lib/kubelet/config.yaml", "/var/lib/kubelet/kubeadm-flags.env"}

// expectFreshWorkerAlike adds a worker to the cluster's MachineDeployment and
// compares the updated worker's files with the fresh one's: the variable's
// file and the kubelet's configuration and flags.
func expectFreshWorkerAlike(c client.Client, namespace string) {
	clusters := &clusterv1.ClusterList{}
	Expect(c.List(ctx, clusters, client.InNamespace(namespace))).To(Succeed())
	Expect(clusters.Items).To(HaveLen(1))
	cluster := &clusters.Items[0]
	file, ok := filesVariable(*cluster)
	Expect(ok).To(BeTrue())
	updated := workers(c, cluster)
	Expect(updated).To(HaveLen(1))

	By("Adding a fresh worker, to compare the updated one with")
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](2)
	Expect(c.Patch(ctx, cluster, patch)).To(Succeed())
	var fresh clusterv1.Machine
	Eventually(func(g Gomega) {
		for _, m := range workers(c, cluster) {
			if m.Name != updated[0].Name {
				g.Expect(conditions.IsTrue(&m, clusterv1.MachineReadyCondition)).To(BeTrue(), "%s is not ready", m.Name)
				fresh = m
				return
			}
		}
		g.Expect(false).To(BeTrue(), "no second worker yet")
	}, 10*time.Minute, 5*time.Second).Should(Succeed())

	for _, path := range append([]string{file.Path}, inPlaceWorkerFiles...) {
		got, want := fileOnHost(updated[0], path), fileOnHost(fresh, path)
		Expect(got).To(Equal(want), "%s on the worker updated in place differs from a fresh worker's", path)
	}
}

// workers are the cluster's Machines that are not control planes.
func workers(c client.Client, cluster *clusterv1.Cluster) []clusterv1.Machine {
	machines := framework.GetMachinesByCluster(ctx, framework.GetMachinesByClusterInput{Lister: c, ClusterName: cluster.Name, Namespace: cluster.Namespace})
	return slices.DeleteFunc(machines, func(m clusterv1.Machine) bool {
		_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
		return cp
	})
}

// fileOnHost is a file on m's host, m's own provider ID (checked to be
// m's) left out.
func fileOnHost(m clusterv1.Machine, path string) workload.HostFile {
	f, err := workload.ReadHostFile(func(args ...string) ([]byte, error) { return host.ExecIn(labDir, hostKey(m), args...) }, path)
	Expect(err).NotTo(HaveOccurred(), "on %s", m.Name)
	var own bool
	f.Content, own = workload.WithoutProviderID(f.Content, m.Spec.ProviderID)
	Expect(own).To(BeTrue(), "%s on %s names another machine's provider ID", path, m.Name)
	return f
}
