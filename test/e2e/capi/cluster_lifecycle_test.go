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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	capie2e "sigs.k8s.io/cluster-api/test/e2e"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/capi/flavors"
)

// Cluster API's specs of a ClusterClass-based cluster's life: changes to its
// class rolled out, and its deletion in order. Each runs once per format.

var _ = Describe("Cluster API's ClusterClass changes", Label("ClusterClassChanges", "ClusterClass"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.ClusterClassChangesSpec(ctx, func() capie2e.ClusterClassChangesSpecInput {
			return capie2e.ClusterClassChangesSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                flavors.FlavorName("topology", f),
				// Upstream changes verbosity, which raw cannot carry; these
				// fields mean the same in every format, and both roll
				// Machines out.
				ModifyControlPlaneFields: map[string]any{
					"spec.kubeadmConfigSpec.clusterConfiguration.apiServer.extraArgs": []any{
						map[string]any{"name": "v", "value": "4"},
					},
				},
				ModifyMachineDeploymentBootstrapConfigTemplateFields: map[string]any{
					"spec.template.spec.joinConfiguration.timeouts.tlsBootstrapSeconds": int64(240),
				},
			}
		})
	})
})

var _ = Describe("Cluster API's cluster deletion", Label("ClusterDeletion", "ClusterClass"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.ClusterDeletionSpec(ctx, func() capie2e.ClusterDeletionSpecInput {
			return capie2e.ClusterDeletionSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                ptr.To(flavors.FlavorName("topology", f)),
				ClusterDeletionPhases: deletionPhases,
			}
		})
	})
})

// deletionPhases are upstream's phases with the simulated cluster in the
// place of Docker's: workers first, then the control plane, then the
// infrastructure cluster, each blocked until the spec has seen it waiting.
var deletionPhases = []capie2e.ClusterDeletionPhase{
	{
		ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
			if ref.Kind == "Machine" {
				return ownedBy(owners, "MachineDeployment", "MachineSet")
			}
			return ref.Kind == "MachineDeployment" || ref.Kind == "MachineSet"
		},
		BlockingObjectFilter: isKind("Machine"),
	},
	{
		ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
			if ref.Kind == "Machine" {
				return ownedBy(owners, "KubeadmControlPlane")
			}
			return ref.Kind == "KubeadmControlPlane"
		},
		BlockingObjectFilter: isKind("Machine"),
	},
	{
		ObjectFilter:         isKind("SimulatedCluster"),
		BlockingObjectFilter: isKind("SimulatedCluster"),
	},
}

func isKind(kind string) func(corev1.ObjectReference, []metav1.OwnerReference) bool {
	return func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool { return ref.Kind == kind }
}

func ownedBy(owners []metav1.OwnerReference, kinds ...string) bool {
	for _, o := range owners {
		for _, k := range kinds {
			if o.Kind == k {
				return true
			}
		}
	}
	return false
}

var _ = Describe("Cluster API's ClusterClass rollout", Label("ClusterClassRollout", "ClusterClass"), func() {
	// The spec changes verbosity, which raw refuses.
	inFormats([]bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition}, func(f bootstrapv1.Format) {
		capie2e.ClusterClassRolloutSpec(ctx, func() capie2e.ClusterClassRolloutSpecInput {
			return capie2e.ClusterClassRolloutSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                flavors.FlavorName("topology-taints", f),
			}
		})
	})
})
