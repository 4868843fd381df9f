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
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/google/go-containerregistry/pkg/name"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/availability"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/capi/flavors"
)

// upgradeLabel marks the specs that upgrade Kubernetes: their clusters start
// on nodes of the previous minor, which the suite then builds (see
// upgradeSpec).
const upgradeLabel = "K8s-Upgrade"

// Cluster API's upgrade spec, unchanged but for its conformance step (a
// container Docker runs): a control plane, a MachineDeployment and a
// MachinePool go from the previous minor to the default release, in every
// format; and a ClusterClass cluster by its topology's version. A probe
// reads through the control-plane endpoint from the moment the control plane
// is told the new version; after the spec the cluster must stay as it is.

var _ = Describe("Cluster API's cluster upgrade", upgradeSpec("ClusterUpgrade", bootstrapv1.Formats), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		upgradeSpecIn(flavors.FlavorName("upgrades", f))
	})
})

var _ = Describe("Cluster API's ClusterClass upgrade", upgradeSpec("ClusterClassUpgrade", classUpgradeFormats), Label("ClusterClass"), func() {
	inFormats(classUpgradeFormats, func(f bootstrapv1.Format) {
		upgradeSpecIn(flavors.FlavorName("topology", f))
	})
})

// classUpgradeFormats: the ClusterClass path is the same in every format
// once the class's patches are applied; one shows it.
var classUpgradeFormats = []bootstrapv1.Format{bootstrapv1.CloudConfig}

// upgradeSpecIn declares the upgrade spec with a flavor: one control-plane
// machine and one worker of each kind, which the spec then rolls.
func upgradeSpecIn(flavor string) {
	w := &upgradeWatch{}
	capie2e.ClusterUpgradeConformanceSpec(ctx, func() capie2e.ClusterUpgradeConformanceSpecInput {
		setUpgradeVariables(e2eConfig)
		return capie2e.ClusterUpgradeConformanceSpecInput{
			E2EConfig:                          e2eConfig,
			ClusterctlConfigPath:               clusterctlConfigPath,
			BootstrapClusterProxy:              bootstrapClusterProxy,
			ArtifactFolder:                     artifactFolder,
			SkipCleanup:                        skipCleanup,
			SkipConformanceTests:               true,
			Flavor:                             ptr.To(flavor),
			WorkerMachineCount:                 ptr.To[int64](1),
			PreWaitForControlPlaneToBeUpgraded: w.start,
		}
	})
	// After the spec's It, before its AfterEach deletes the cluster.
	JustAfterEach(w.settle)
}

// setUpgradeVariables gives the spec its versions from versions.env's
// releases, and the etcd and CoreDNS tags the newer release's kubeadm names
// (its node images are tagged as kubeadm asks).
func setUpgradeVariables(cfg *clusterctl.E2EConfig) {
	from, to := testbin.UpgradeFromRelease(), testbin.DefaultRelease()
	images, err := to.LoadNodeImages()
	Expect(err).NotTo(HaveOccurred())
	cfg.Variables[capie2e.KubernetesVersionUpgradeFrom] = from.Kubernetes
	cfg.Variables[capie2e.KubernetesVersionUpgradeTo] = to.Kubernetes
	cfg.Variables[capie2e.EtcdVersionUpgradeTo] = imageTag(images, "etcd")
	cfg.Variables[capie2e.CoreDNSVersionUpgradeTo] = imageTag(images, "coredns")
}

func imageRef(images *testbin.NodeImages, component string) string {
	img, err := images.Image(component)
	Expect(err).NotTo(HaveOccurred())
	return img.Ref
}

func imageTag(images *testbin.NodeImages, component string) string {
	tag, err := name.NewTag(imageRef(images, component))
	Expect(err).NotTo(HaveOccurred())
	return tag.TagStr()
}

// upgradeWatch follows one upgrade: where its cluster is, the probe, and
// when the control plane was told the new version.
type upgradeWatch struct {
	proxy              framework.ClusterProxy
	namespace, cluster string
	probe              *availability.Probe
	started            time.Time
}

func (w *upgradeWatch) start(proxy framework.ClusterProxy, namespace, cluster string) {
	w.proxy, w.namespace, w.cluster, w.started = proxy, namespace, cluster, time.Now()
	p, err := availability.Watch(proxy.GetWorkloadCluster(ctx, namespace, cluster).GetRESTConfig())
	Expect(err).NotTo(HaveOccurred())
	w.probe = p
}

// upgradeResult is the report entry of one upgrade (make e2e-capi-upgrade-results
// reads it): how long it took, and what the probe saw meanwhile.
type upgradeResult struct {
	Minutes              float64 `json:"minutes"`
	Requests             int     `json:"requests"`
	Failed               int     `json:"failed"`
	LongestOutageSeconds float64 `json:"longestOutageSeconds"`
}

// upgradeEntry names the report entry.
const upgradeEntry = "upgrade"

func (w *upgradeWatch) settle() {
	if w.probe == nil {
		return // the spec failed before the upgrade began
	}
	r := w.probe.Stop()
	w.probe = nil
	AddReportEntry(upgradeEntry, upgradeResult{
		Minutes: time.Since(w.started).Minutes(), Requests: r.Requests, Failed: r.Failed,
		LongestOutageSeconds: r.LongestOutage.Seconds(),
	}, ReportEntryVisibilityAlways)
	GinkgoWriter.Printf("availability during the upgrade: %s\n", r)
	if CurrentSpecReport().Failed() {
		return
	}
	w.expectSettled()
}

// expectSettled checks what the spec leaves out: every Machine runs the new
// version, etcd, CoreDNS and kube-proxy run the images the new kubeadm names,
// and no machine is replaced afterwards.
func (w *upgradeWatch) expectSettled() {
	to := testbin.DefaultRelease()
	images, err := to.LoadNodeImages()
	Expect(err).NotTo(HaveOccurred())
	mgmt := w.proxy.GetClient()
	machines := func(g Gomega) []string {
		list := &clusterv1.MachineList{}
		g.Expect(mgmt.List(ctx, list, client.InNamespace(w.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: w.cluster})).To(Succeed())
		var names []string
		for _, m := range list.Items {
			g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s is being deleted", m.Name)
			g.Expect(m.Spec.Version).To(Equal(to.Kubernetes), "Machine %s", m.Name)
			g.Expect(m.Status.NodeInfo).NotTo(BeNil(), "Machine %s has no node", m.Name)
			g.Expect(m.Status.NodeInfo.KubeletVersion).To(Equal(to.Kubernetes), "Machine %s's kubelet", m.Name)
			names = append(names, m.Name)
		}
		pools := &clusterv1.MachinePoolList{}
		g.Expect(mgmt.List(ctx, pools, client.InNamespace(w.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: w.cluster})).To(Succeed())
		for _, p := range pools.Items {
			names = append(names, p.Spec.ProviderIDList...)
		}
		slices.Sort(names)
		return names
	}
	var before []string
	Eventually(func(g Gomega) { before = machines(g) }).Should(Succeed())

	By("Checking that etcd, CoreDNS and kube-proxy run the images kubeadm " + to.Kubernetes + " names")
	workload := w.proxy.GetWorkloadCluster(ctx, w.namespace, w.cluster).GetClient()
	etcd := &corev1.PodList{}
	Expect(workload.List(ctx, etcd, client.InNamespace("kube-system"), client.MatchingLabels{"component": "etcd"})).To(Succeed())
	Expect(etcd.Items).NotTo(BeEmpty())
	for _, p := range etcd.Items {
		Expect(p.Spec.Containers[0].Image).To(Equal(imageRef(images, "etcd")), "Pod %s", p.Name)
	}
	dns := &appsv1.Deployment{}
	Expect(workload.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, dns)).To(Succeed())
	Expect(dns.Spec.Template.Spec.Containers[0].Image).To(Equal(imageRef(images, "coredns")))
	proxy := &appsv1.DaemonSet{}
	Expect(workload.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-proxy"}, proxy)).To(Succeed())
	Expect(proxy.Spec.Template.Spec.Containers[0].Image).To(Equal(imageRef(images, "kube-proxy")))

	By("Checking that no machine is replaced for a minute")
	Consistently(func(g Gomega) []string { return machines(g) }, time.Minute, 10*time.Second).Should(Equal(before))
}
