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

	"k8s.io/utils/ptr"

	capie2e "sigs.k8s.io/cluster-api/test/e2e"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/capi/flavors"
)

// Cluster API's specs of workers and control planes, each once per format.

var _ = Describe("Cluster API's MachineDeployment scale", Label("MachineDeploymentScale"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.MachineDeploymentScaleSpec(ctx, func() capie2e.MachineDeploymentScaleSpecInput {
			return capie2e.MachineDeploymentScaleSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                flavors.FlavorName("", f),
			}
		})
	})
})

var _ = Describe("Cluster API's MachineDeployment remediation", Label("MachineDeploymentRemediation"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.MachineDeploymentRemediationSpec(ctx, func() capie2e.MachineDeploymentRemediationSpecInput {
			return capie2e.MachineDeploymentRemediationSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                ptr.To(flavors.FlavorName("md-remediation", f)),
			}
		})
	})
})

var _ = Describe("Cluster API's MachinePool", Label("MachinePool"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.MachinePoolSpec(ctx, func() capie2e.MachinePoolInput {
			return capie2e.MachinePoolInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                ptr.To(flavors.FlavorName("machine-pool", f)),
			}
		})
	})
})

var _ = Describe("Cluster API's KubeadmControlPlane adoption", Label("KCPAdoption"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.KCPAdoptionSpec(ctx, func() capie2e.KCPAdoptionSpecInput {
			return capie2e.KCPAdoptionSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                ptr.To(flavors.FlavorName("kcp-adoption", f)),
			}
		})
	})
})

var _ = Describe("Cluster API's KubeadmControlPlane infrastructure adoption", Label("KCPInfraAdoption", "ClusterClass"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.KCPInfraAdoptionSpec(ctx, func() capie2e.KCPInfraAdoptionSpecInput {
			return capie2e.KCPInfraAdoptionSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                ptr.To(flavors.FlavorName("topology", f)),
			}
		})
	})
})

// KCPRemediation's control-plane machines hold their bootstrap in a
// preKubeadmCommand, which raw refuses.
var _ = Describe("Cluster API's KubeadmControlPlane remediation", Label("KCPRemediation"), func() {
	inFormats(flavors.CommandFormats, func(f bootstrapv1.Format) {
		capie2e.KCPRemediationSpec(ctx, func() capie2e.KCPRemediationSpecInput {
			return capie2e.KCPRemediationSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                ptr.To(flavors.FlavorName("kcp-remediation", f)),
			}
		})
	})
})

var _ = Describe("Cluster API's KubeadmControlPlane and MachineDeployment rollout", Label("KCPAndMachineDeploymentRollout"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.KCPAndMachineDeploymentRolloutSpec(ctx, func() capie2e.KCPAndMachineDeploymentRolloutSpecInput {
			return capie2e.KCPAndMachineDeploymentRolloutSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                flavors.FlavorName("kcp-md-taints", f),
			}
		})
	})
})

var _ = Describe("Cluster API's node drain", Label("NodeDrainTimeout", "ClusterClass"), func() {
	inEveryFormat(func(f bootstrapv1.Format) {
		capie2e.NodeDrainTimeoutSpec(ctx, func() capie2e.NodeDrainTimeoutSpecInput {
			return capie2e.NodeDrainTimeoutSpecInput{
				E2EConfig:             e2eConfig,
				ClusterctlConfigPath:  clusterctlConfigPath,
				BootstrapClusterProxy: bootstrapClusterProxy,
				ArtifactFolder:        artifactFolder,
				SkipCleanup:           skipCleanup,
				Flavor:                ptr.To(flavors.FlavorName("topology", f)),
			}
		})
	})
})
