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
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// What Cluster API's controllers do around this provider's extension when
// an in-place update does not simply succeed, on one MachineDeployment
// worker (the files variable is overridden for the workers only, so the
// control plane stays as it is):
//   - the update fails on the node: the Machine's Updating condition says
//     InPlaceUpdateFailed, Cluster API calls again, and once the node can
//     take it the update succeeds with the same Machine;
//   - a second extension serves the same hooks: Cluster API refuses to
//     choose, with the error docs/operator/in-place-updates.md quotes, and
//     changes nothing until one is left;
//   - a change the extension does not claim (a file removed): the worker is
//     replaced.
//
// Serial: it reads Cluster API's core manager's log, which the process
// that holds the stack has. One format: what happens around the extension
// is the same in every format.
var _ = Describe("In-place updates that fail, meet a second extension or cannot apply", inPlaceSpec("InPlaceUpdateEdges", edgeFormats), Serial, func() {
	inFormats(edgeFormats, func(f bootstrapv1.Format) {
		const specName = "in-place-edges"
		var (
			namespace     *corev1.Namespace
			cancelWatches context.CancelFunc
			result        = new(clusterctl.ApplyClusterTemplateAndWaitResult)
		)
		BeforeEach(func() {
			namespace, cancelWatches = framework.SetupSpecNamespace(ctx, specName, bootstrapClusterProxy, artifactFolder, nil)
		})
		It("reports a failed update and retries it, refuses two extensions and rolls out what it cannot claim", func() {
			Expect(shared).NotTo(BeNil(), "a serial spec runs in the process that holds the stack")
			mgmt := bootstrapClusterProxy.GetClient()
			cluster := applyInPlaceCluster(specName, f, namespace.Name, e2eConfig.MustGetVariable("KUBERNETES_VERSION"), 1,
				map[string]string{"MD_MAX_SURGE": "1", "MD_MAX_UNAVAILABLE": "1"}, result)
			controlPlane := machineNamesOf(mgmt, cluster, controlPlanes)
			worker := workers(mgmt, cluster)
			Expect(worker).To(HaveLen(1))
			w := worker[0]
			workload := bootstrapClusterProxy.GetWorkloadCluster(ctx, cluster.Namespace, cluster.Name).GetClient()

			By("Failing an update on the node: a regular file where the new file's directory goes")
			blocker := "/etc/cabpk-e2e/in-place-blocker"
			onHost(w, "mkdir", "-p", filepath.Dir(blocker))
			onHost(w, "touch", blocker)
			blocked := classFile{Path: blocker + "/file", Content: "written once the node could take it"}
			setWorkerFiles(mgmt, cluster, blocked)
			Eventually(func(g Gomega) {
				m := machineOf(g, mgmt, w)
				g.Expect(conditions.GetReason(m, clusterv1.MachineUpdatingCondition)).To(Equal(clusterv1.MachineInPlaceUpdateFailedReason))
			}, 5*time.Minute, time.Second).Should(Succeed())
			Expect(coreLog()).To(ContainSubstring("failed at step files"), "Cluster API's core manager did not log the failed step")
			Expect(warnings(mgmt, w, bootstrapv1.InPlaceUpdateFailedEvent)).To(ContainElement(ContainSubstring("failed at step files")))

			By("Letting the node take it: Cluster API calls again and the same Machine is updated")
			onHost(w, "rm", blocker)
			expectWorkerHas(mgmt, cluster, w, blocked)

			By("Registering a second extension for the same hooks")
			second := scopedExtensionConfig(specName+"-second-"+string(f), namespace.Name)
			Expect(mgmt.Create(ctx, second)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(mgmt.Delete(ctx, second))).To(Succeed()) })
			Eventually(func(g Gomega) {
				g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
				g.Expect(second.Status.Handlers).NotTo(BeEmpty())
			}, 2*time.Minute, time.Second).Should(Succeed())
			changed := classFile{Path: blocked.Path, Content: "written once one extension was left"}
			setWorkerFiles(mgmt, cluster, changed)
			Eventually(coreLog, 2*time.Minute, time.Second).Should(ContainSubstring("found multiple CanUpdateMachineSet hooks"))
			Consistently(func(g Gomega) {
				g.Expect(hostFile(w, changed.Path)).To(Equal(blocked.Content))
				g.Expect(updatesLeft(g, workload)).To(BeZero())
				g.Expect(machineNamesOf(mgmt, cluster)).To(HaveKey(w.Name))
			}, 30*time.Second, 2*time.Second).Should(Succeed())

			By("Removing the second extension: the change goes in place")
			Expect(mgmt.Delete(ctx, second)).To(Succeed())
			expectWorkerHas(mgmt, cluster, w, changed)

			By("Removing the file, which no update claims: the worker is replaced")
			other := classFile{Path: "/etc/cabpk-e2e/in-place-other", Content: "on a fresh worker"}
			setWorkerFiles(mgmt, cluster, other)
			Eventually(func(g Gomega) {
				ws := workers(mgmt, cluster)
				g.Expect(ws).To(HaveLen(1))
				g.Expect(ws[0].Name).NotTo(Equal(w.Name), "the worker was not replaced")
				g.Expect(conditions.IsTrue(&ws[0], clusterv1.MachineReadyCondition)).To(BeTrue())
				g.Expect(hostFile(ws[0], other.Path)).To(Equal(other.Content))
			}, 10*time.Minute, 5*time.Second).Should(Succeed())
			Expect(machineNamesOf(mgmt, cluster, controlPlanes)).To(Equal(controlPlane), "a control-plane Machine was replaced")
		})
		AfterEach(func() {
			framework.DumpSpecResourcesAndCleanup(ctx, specName, bootstrapClusterProxy, clusterctlConfigPath, artifactFolder,
				namespace, cancelWatches, result.Cluster, e2eConfig.GetIntervals, skipCleanup)
		})
	})
})

// controlPlanes selects control-plane Machines (KubeadmControlPlane gives
// them the label with no value).
var controlPlanes = client.MatchingLabels{clusterv1.MachineControlPlaneLabel: ""}

// edgeFormats: one, as Cluster API's handling of the extension's answers is
// the same in every format.
var edgeFormats = []bootstrapv1.Format{bootstrapv1.CloudConfig}

// setWorkerFiles gives the cluster's MachineDeployment, and only it, the
// files variable.
func setWorkerFiles(c client.Client, cluster *clusterv1.Cluster, files ...classFile) {
	value, err := json.Marshal(files)
	Expect(err).NotTo(HaveOccurred())
	Expect(c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	md := &cluster.Spec.Topology.Workers.MachineDeployments[0]
	md.Variables.Overrides = []clusterv1.ClusterVariable{{Name: objects.FilesVariable, Value: apiextensionsv1.JSON{Raw: value}}}
	Expect(c.Patch(ctx, cluster, patch)).To(Succeed())
}

// expectWorkerHas waits until worker w, not replaced, is up to date with
// the file on its host.
func expectWorkerHas(c client.Client, cluster *clusterv1.Cluster, w clusterv1.Machine, file classFile) {
	Eventually(func(g Gomega) {
		m := machineOf(g, c, w)
		g.Expect(conditions.IsTrue(m, clusterv1.MachineUpToDateCondition)).To(BeTrue(), "%s is not up to date", m.Name)
		g.Expect(hostFile(w, file.Path)).To(Equal(file.Content))
	}, 5*time.Minute, 2*time.Second).Should(Succeed())
	Expect(machineNamesOf(c, cluster)).To(HaveKey(w.Name), "the worker was replaced")
}

// machineOf reads Machine m again; it must still exist.
func machineOf(g Gomega, c client.Client, m clusterv1.Machine) *clusterv1.Machine {
	out := &clusterv1.Machine{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(&m), out)).To(Succeed(), "Machine %s is gone", m.Name)
	return out
}

// onHost runs a command on m's host.
func onHost(m clusterv1.Machine, args ...string) {
	out, err := host.ExecIn(labDir, hostKey(m), args...)
	Expect(err).NotTo(HaveOccurred(), "%v on %s: %s", args, m.Name, out)
}

// hostFile is a file's content on m's host, empty when it has none.
func hostFile(m clusterv1.Machine, path string) string {
	out, err := host.ExecIn(labDir, hostKey(m), "cat", path)
	if err != nil {
		return ""
	}
	return string(out)
}

// warnings are the notes of the warning events with reason on Machine m.
func warnings(c client.Client, m clusterv1.Machine, reason string) []string {
	list := &eventsv1.EventList{}
	Expect(c.List(ctx, list, client.InNamespace(m.Namespace))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Machine" && e.Regarding.Name == m.Name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// coreLog is Cluster API's core manager's log so far.
func coreLog() string {
	b, err := os.ReadFile(shared.ClusterAPICoreLog())
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}
