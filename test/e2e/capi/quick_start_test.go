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
	. "github.com/onsi/ginkgo/v2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/capi/flavors"
)

var _ = Describe("Cluster API's quick start", Label("QuickStart"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
			return capie2e.QuickStartSpecInput{
				E2EConfig:               e2eConfig,
				ClusterctlConfigPath:    clusterctlConfigPath,
				BootstrapClusterProxy:   bootstrapClusterProxy,
				ArtifactFolder:          artifactFolder,
				SkipCleanup:             skipCleanup,
				Flavor:                  ptr.To(flavors.FlavorName("", f)),
				PostMachinesProvisioned: validateClusterObjects(false),
			}
		})
	}, "smoke")
})

var _ = Describe("Cluster API's quick start with ClusterClass", Label("QuickStart", "ClusterClass"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
			return capie2e.QuickStartSpecInput{
				E2EConfig:               e2eConfig,
				ClusterctlConfigPath:    clusterctlConfigPath,
				BootstrapClusterProxy:   bootstrapClusterProxy,
				ArtifactFolder:          artifactFolder,
				SkipCleanup:             skipCleanup,
				Flavor:                  ptr.To(flavors.FlavorName("topology", f)),
				PostMachinesProvisioned: validateClusterObjects(true),
			}
		})
	})
})

// validateClusterObjects runs the framework's checks of a cluster's objects
// as upstream's quick-start suite wires them: owner references and
// finalizers come back when removed, owner references follow an API
// version change, and nothing keeps changing once the cluster is up.
func validateClusterObjects(topology bool) func(framework.ClusterProxy, string, string) {
	return func(proxy framework.ClusterProxy, namespace, clusterName string) {
		filter := clusterctlcluster.FilterClusterObjectsWithNameFilter(clusterName)
		owners := []map[string]func(types.NamespacedName, []metav1.OwnerReference) error{
			framework.CoreOwnerReferenceAssertion,
			framework.ExpOwnerReferenceAssertions,
			simulatedOwnerReferenceAssertions(topology),
			framework.KubeadmBootstrapOwnerReferenceAssertions,
			framework.KubeadmControlPlaneOwnerReferenceAssertions(topology),
			framework.KubernetesReferenceAssertions,
		}
		By("Checking that owner references are resilient")
		framework.ValidateOwnerReferencesResilience(ctx, proxy, namespace, clusterName, filter, owners...)
		By("Checking that owner references are updated to the correct API version")
		framework.ValidateOwnerReferencesOnUpdate(ctx, proxy, namespace, clusterName, filter, owners...)

		coreFinalizers := framework.CoreFinalizersAssertionWithLegacyClusters
		if topology {
			coreFinalizers = framework.CoreFinalizersAssertionWithClassyClusters
		}
		By("Checking that finalizers are resilient")
		framework.ValidateFinalizersResilience(ctx, proxy, namespace, clusterName, filter,
			coreFinalizers,
			framework.KubeadmControlPlaneFinalizersAssertion,
			framework.ExpFinalizersAssertion,
			simulatedFinalizersAssertion,
		)

		By("Checking that resourceVersions are stable")
		framework.ValidateResourceVersionStable(ctx, framework.ValidateResourceVersionStableInput{
			ClusterProxy:             proxy,
			Namespace:                namespace,
			OwnerGraphFilterFunction: filter,
			WaitToBecomeStable:       e2eConfig.GetIntervals("quick-start", "wait-resource-versions-become-stable"),
			WaitToRemainStable:       e2eConfig.GetIntervals("quick-start", "wait-resource-versions-remain-stable"),
		})
	}
}
