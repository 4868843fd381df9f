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

// managementLabel marks the specs that make a management cluster of a
// workload cluster with clusterctl init: its nodes need every provider's
// image, which the suite then builds (see managementSpec).
const managementLabel = "management"

// The workload cluster's nodes boot from the management machine image;
// clusterctl init installs every provider there from the suite's repository,
// the cluster is moved into itself and back. One Kubernetes version is
// built, so the spec's upgrade step is skipped.
var _ = Describe("Cluster API's self-hosted cluster", managementSpec("SelfHosted", selfHostedFormats), func() {
	inFormats(selfHostedFormats, selfHosted)
})

// selfHostedFormats: the spec checks the providers as Pods and clusterctl
// move, which the format does not change.
var selfHostedFormats = []bootstrapv1.Format{bootstrapv1.CloudConfig}

func selfHosted(f bootstrapv1.Format) {
	capie2e.SelfHostedSpec(ctx, func() capie2e.SelfHostedSpecInput {
		return capie2e.SelfHostedSpecInput{
			E2EConfig:                e2eConfig,
			ClusterctlConfigPath:     clusterctlConfigPath,
			BootstrapClusterProxy:    bootstrapClusterProxy,
			ArtifactFolder:           artifactFolder,
			SkipCleanup:              skipCleanup,
			Flavor:                   flavors.FlavorName("self-hosted", f),
			SkipUpgrade:              true,
			ControlPlaneMachineCount: ptr.To[int64](1),
			WorkerMachineCount:       ptr.To[int64](1),
		}
	})
}
