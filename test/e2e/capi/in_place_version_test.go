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
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
)

// A Kubernetes upgrade of the previous minor's cluster (three control-plane
// machines and a MachineDeployment worker of the in-place ClusterClass) to
// the default release, with no Machine replaced: KubeadmControlPlane puts
// the new version in the cluster's kubeadm-config and updates kube-proxy
// and CoreDNS, then each control-plane machine in turn and then the worker
// fetch the new kubeadm and kubelet from the stack's binaries server and
// run kubeadm's upgrade phases. The nodes boot the previous release; the
// new release's images are in their stores, as a site's registry would
// serve them. Afterwards the upgrade specs' checks and report entry: every
// Machine's kubelet is of the new version, etcd, CoreDNS and kube-proxy run
// the images the new kubeadm names, and nothing rolls afterwards.
var _ = Describe("A Kubernetes upgrade in place", heavySpec(inPlaceVersionSpec, versionFormats, inPlaceLabel, upgradeLabel), func() {
	inFormats(versionFormats, func(f bootstrapv1.Format) {
		const specName = "in-place-version"
		var (
			namespace     *corev1.Namespace
			cancelWatches context.CancelFunc
			result        = new(clusterctl.ApplyClusterTemplateAndWaitResult)
		)
		BeforeEach(func() {
			namespace, cancelWatches = framework.SetupSpecNamespace(ctx, specName, bootstrapClusterProxy, artifactFolder, nil)
		})
		It("upgrades every machine in place, the control plane first", func() {
			from, to := testbin.UpgradeFromRelease(), testbin.DefaultRelease()
			mgmt := bootstrapClusterProxy.GetClient()
			cluster := applyInPlaceCluster(specName, f, namespace.Name, from.Kubernetes, 3, map[string]string{
				"KUBEADM_CONTROL_PLANE_MAX_SURGE": "0", "MD_MAX_SURGE": "1", "MD_MAX_UNAVAILABLE": "1",
			}, result)
			before := machineNamesOf(mgmt, cluster)

			By("Upgrading the cluster's topology to " + to.Kubernetes + ", with etcd's and CoreDNS's tags, as upstream's upgrade spec does")
			images, err := to.LoadNodeImages()
			Expect(err).NotTo(HaveOccurred())
			w := &upgradeWatch{}
			w.start(bootstrapClusterProxy, cluster.Namespace, cluster.Name)
			patch := client.MergeFrom(cluster.DeepCopy())
			cluster.Spec.Topology.Version = to.Kubernetes
			setTopologyVariable(cluster, objects.EtcdImageTagVariable, imageTag(images, "etcd"))
			setTopologyVariable(cluster, objects.CoreDNSImageTagVariable, imageTag(images, "coredns"))
			Expect(mgmt.Patch(ctx, cluster, patch)).To(Succeed())

			By("Waiting for every machine to run " + to.Kubernetes + ", none replaced")
			Eventually(func(g Gomega) {
				machines := &clusterv1.MachineList{}
				g.Expect(mgmt.List(ctx, machines, client.InNamespace(cluster.Namespace))).To(Succeed())
				g.Expect(machines.Items).To(HaveLen(before.Len()))
				for _, m := range machines.Items {
					g.Expect(before.Has(m.Name)).To(BeTrue(), "Machine %s is new: a machine was replaced", m.Name)
					g.Expect(m.Status.NodeInfo).NotTo(BeNil(), "Machine %s has no node", m.Name)
					g.Expect(m.Status.NodeInfo.KubeletVersion).To(Equal(to.Kubernetes), "Machine %s's kubelet", m.Name)
					g.Expect(conditions.IsTrue(&m, clusterv1.MachineUpToDateCondition)).To(BeTrue(), "%s is not up to date", m.Name)
				}
			}, 30*time.Minute, 10*time.Second).Should(Succeed())
			// The upgrade specs' entry and checks: make
			// e2e-capi-upgrade-results puts it beside the rollouts.
			w.settle()
			Expect(machineNamesOf(mgmt, cluster)).To(Equal(before), "a Machine was replaced")
		})
		AfterEach(func() {
			framework.DumpSpecResourcesAndCleanup(ctx, specName, bootstrapClusterProxy, clusterctlConfigPath, artifactFolder,
				namespace, cancelWatches, result.Cluster, e2eConfig.GetIntervals, skipCleanup)
		})
	})
})

// setTopologyVariable sets a variable of the Cluster's topology, in place
// of the value the class defaulted.
func setTopologyVariable(c *clusterv1.Cluster, name string, value any) {
	v := clusterv1.ClusterVariable{Name: name, Value: *objects.JSONValue(value)}
	vars := c.Spec.Topology.Variables
	if i := slices.IndexFunc(vars, func(x clusterv1.ClusterVariable) bool { return x.Name == name }); i >= 0 {
		vars[i] = v
		return
	}
	c.Spec.Topology.Variables = append(vars, v)
}

// inPlaceVersionSpec is the spec's label.
const inPlaceVersionSpec = "InPlaceKubernetesUpgrade"

// versionFormats: one, as what changes a node's version is the same in
// every format.
var versionFormats = []bootstrapv1.Format{bootstrapv1.CloudConfig}
