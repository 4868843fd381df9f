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
	"maps"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/cluster-api/util/conditions"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/capi/flavors"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// This provider's manager is killed (SIGKILL) once an in-place update runs
// on a node, and starts again: the update's state is its Pod and Secret in
// the workload cluster, so the new manager finishes what the killed one
// started, and Cluster API replaces no machine. Three control-plane
// machines, as KubeadmControlPlane updates in place only with maxSurge 0,
// which it allows from three replicas. The spec is serial: it runs
// in the process that holds the stack, with no other spec beside it. One
// format: the update's state is the same in every format.
var _ = Describe("An in-place update across a killed manager", inPlaceSpec("InPlaceUpdateAfterKill", killFormats), Serial, func() {
	inFormats(killFormats, func(f bootstrapv1.Format) {
		const specName = "in-place-kill"
		var (
			namespace     *corev1.Namespace
			cancelWatches context.CancelFunc
			result        = new(clusterctl.ApplyClusterTemplateAndWaitResult)
		)
		BeforeEach(func() {
			namespace, cancelWatches = framework.SetupSpecNamespace(ctx, specName, bootstrapClusterProxy, artifactFolder, nil)
		})
		It("finishes the update the killed manager started", func() {
			Expect(shared).NotTo(BeNil(), "a serial spec runs in the process that holds the stack")
			mgmt := bootstrapClusterProxy.GetClient()
			cluster := applyInPlaceCluster(specName, f, namespace.Name, e2eConfig.MustGetVariable("KUBERNETES_VERSION"), 3, map[string]string{
				"KUBEADM_CONTROL_PLANE_MAX_SURGE": "0", "MD_MAX_SURGE": "1", "MD_MAX_UNAVAILABLE": "1",
			}, result)
			before := machineNamesOf(mgmt, cluster)
			workload := bootstrapClusterProxy.GetWorkloadCluster(ctx, cluster.Namespace, cluster.Name).GetClient()

			By("Changing the class's files variable")
			file := classFile{Path: "/etc/cabpk-e2e/in-place-kill", Content: "written by the manager that started again"}
			value, err := json.Marshal([]classFile{file})
			Expect(err).NotTo(HaveOccurred())
			patch := client.MergeFrom(cluster.DeepCopy())
			cluster.Spec.Topology.Variables = append(cluster.Spec.Topology.Variables,
				clusterv1.ClusterVariable{Name: objects.FilesVariable, Value: apiextensionsv1.JSON{Raw: value}})
			Expect(mgmt.Patch(ctx, cluster, patch)).To(Succeed())

			By("Killing the manager once an update runs on a node")
			Eventually(func(g Gomega) {
				g.Expect(updatesLeft(g, workload)).NotTo(BeZero())
			}, 5*time.Minute, 500*time.Millisecond).Should(Succeed())
			Expect(shared.KillManager()).To(Succeed())

			By("Waiting for the manager that started again to finish every update")
			Eventually(func(g Gomega) {
				machines := &clusterv1.MachineList{}
				g.Expect(mgmt.List(ctx, machines, client.InNamespace(cluster.Namespace))).To(Succeed())
				for _, m := range machines.Items {
					g.Expect(conditions.IsTrue(&m, clusterv1.MachineUpToDateCondition)).To(BeTrue(), "%s is not up to date", m.Name)
					out, err := host.ExecIn(labDir, hostKey(m), "cat", file.Path)
					g.Expect(err).NotTo(HaveOccurred(), "%s: %s", m.Name, out)
					g.Expect(string(out)).To(Equal(file.Content), m.Name)
				}
			}, 10*time.Minute, 5*time.Second).Should(Succeed())
			Expect(machineNamesOf(mgmt, cluster)).To(Equal(before), "a Machine was replaced")
			Eventually(func(g Gomega) { g.Expect(updatesLeft(g, workload)).To(BeZero()) }, time.Minute, time.Second).Should(Succeed())
		})
		AfterEach(func() {
			framework.DumpSpecResourcesAndCleanup(ctx, specName, bootstrapClusterProxy, clusterctlConfigPath, artifactFolder,
				namespace, cancelWatches, result.Cluster, e2eConfig.GetIntervals, skipCleanup)
		})
	})
})

// killFormats: one, as the update's state is the same in every format.
var killFormats = []bootstrapv1.Format{bootstrapv1.CloudConfig}

// applyInPlaceCluster registers this provider's extension for the spec's
// namespace and makes a cluster of the in-place flavor there, of version,
// with the control-plane machines and the worker given: what each of our
// in-place specs starts from.
func applyInPlaceCluster(specName string, f bootstrapv1.Format, namespace, version string, controlPlanes int64, vars map[string]string, result *clusterctl.ApplyClusterTemplateAndWaitResult) *clusterv1.Cluster {
	mgmt := bootstrapClusterProxy.GetClient()
	extension := scopedExtensionConfig(specName+"-"+string(f), namespace)
	Expect(mgmt.Create(ctx, extension)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(mgmt.Delete(ctx, extension))).To(Succeed()) })
	clusterctl.ApplyClusterTemplateAndWait(ctx, clusterctl.ApplyClusterTemplateAndWaitInput{
		ClusterProxy: bootstrapClusterProxy,
		ConfigCluster: clusterctl.ConfigClusterInput{
			LogFolder:                filepath.Join(artifactFolder, "clusters", bootstrapClusterProxy.GetName()),
			ClusterctlConfigPath:     clusterctlConfigPath,
			KubeconfigPath:           bootstrapClusterProxy.GetKubeconfigPath(),
			InfrastructureProvider:   clusterctl.DefaultInfrastructureProvider,
			Flavor:                   flavors.FlavorName(flavors.InPlaceFlavor, f),
			Namespace:                namespace,
			ClusterName:              specName + "-" + string(f),
			KubernetesVersion:        version,
			ControlPlaneMachineCount: ptr.To(controlPlanes),
			WorkerMachineCount:       ptr.To[int64](1),
			ClusterctlVariables:      vars,
		},
		WaitForClusterIntervals:      e2eConfig.GetIntervals(specName, "wait-cluster"),
		WaitForControlPlaneIntervals: e2eConfig.GetIntervals(specName, "wait-control-plane"),
		WaitForMachineDeployments:    e2eConfig.GetIntervals(specName, "wait-worker-nodes"),
	}, result)
	return result.Cluster
}

// scopedExtensionConfig registers this provider's extension for one
// namespace, as docs/operator/in-place-updates.md has it.
func scopedExtensionConfig(name, namespace string) *runtimev1.ExtensionConfig {
	return &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			runtimev1.InjectCAFromSecretAnnotation: stack.ProviderNamespace + "/" + stack.ExtensionServiceName + "-cert",
		}},
		Spec: runtimev1.ExtensionConfigSpec{
			ClientConfig: runtimev1.ClientConfig{Service: runtimev1.ServiceReference{Namespace: stack.ProviderNamespace, Name: stack.ExtensionServiceName}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{namespace},
			}}},
		},
	}
}

// updatesLeft counts the in-place updates' Pods and Secrets in the
// workload cluster.
func updatesLeft(g Gomega, c client.Client) int {
	marked := client.HasLabels{rawv1.NodeUpdateNodeLabel}
	pods, secrets := &corev1.PodList{}, &corev1.SecretList{}
	g.Expect(c.List(ctx, pods, client.InNamespace(rawv1.NodeUpdateNamespace), marked)).To(Succeed())
	g.Expect(c.List(ctx, secrets, client.InNamespace(rawv1.NodeUpdateNamespace), marked)).To(Succeed())
	return len(pods.Items) + len(secrets.Items)
}

// machineNamesOf are the names of the cluster's Machines, of those with
// the labels only when given.
func machineNamesOf(c client.Client, cluster *clusterv1.Cluster, only ...client.MatchingLabels) sets.Set[string] {
	selected := client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}
	for _, l := range only {
		maps.Copy(selected, l)
	}
	machines := &clusterv1.MachineList{}
	Expect(c.List(ctx, machines, client.InNamespace(cluster.Namespace), selected)).To(Succeed())
	names := sets.New[string]()
	for _, m := range machines.Items {
		names.Insert(m.Name)
	}
	return names
}
