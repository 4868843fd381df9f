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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// Owners the simulated kinds have, as Cluster API's framework writes them
// for its Docker provider's kinds (the framework compares API version, kind
// and whether the owner is the controller).
var (
	coreGroupVersion      = clusterv1.GroupVersion.String()
	clusterOwner          = metav1.OwnerReference{APIVersion: coreGroupVersion, Kind: "Cluster"}
	clusterController     = metav1.OwnerReference{APIVersion: coreGroupVersion, Kind: "Cluster", Controller: ptr.To(true)}
	clusterClassOwner     = metav1.OwnerReference{APIVersion: coreGroupVersion, Kind: "ClusterClass"}
	machineController     = metav1.OwnerReference{APIVersion: coreGroupVersion, Kind: "Machine", Controller: ptr.To(true)}
	machinePoolController = metav1.OwnerReference{APIVersion: coreGroupVersion, Kind: "MachinePool", Controller: ptr.To(true)}
)

type ownerAssertions = map[string]func(types.NamespacedName, []metav1.OwnerReference) error

// simulatedOwnerReferenceAssertions are the simulated provider's owner
// references for the framework's owner-reference validators, as
// framework.DevInfraOwnerReferenceAssertions has them for Docker's kinds:
// the framework fails on a kind it has no assertion for.
func simulatedOwnerReferenceAssertions(topologyManaged bool) ownerAssertions {
	clusterOwnerRef := clusterOwner
	if topologyManaged {
		clusterOwnerRef = clusterController
	}
	return ownerAssertions{
		"SimulatedMachine": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, machineController)
		},
		"SimulatedMachineTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			// A ClusterClass's templates are owned by the class, a
			// Cluster's own by the Cluster.
			return framework.HasOneOfExactOwners(owners, []metav1.OwnerReference{clusterOwner}, []metav1.OwnerReference{clusterClassOwner})
		},
		"SimulatedCluster": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			// Controlled by its Cluster when the topology made it.
			return framework.HasExactOwners(owners, clusterOwnerRef)
		},
		"SimulatedClusterTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, clusterClassOwner)
		},
		"SimulatedMachinePool": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, machinePoolController, clusterOwner)
		},
		"SimulatedMachinePoolTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, clusterClassOwner)
		},
	}
}

// simulatedFinalizersAssertion are the finalizers the simulated kinds keep,
// as framework.DevInfraFinalizersAssertion has them for Docker's.
var simulatedFinalizersAssertion = map[string]func(types.NamespacedName) []string{
	"SimulatedMachine":     func(types.NamespacedName) []string { return []string{infrav1.MachineFinalizer} },
	"SimulatedCluster":     func(types.NamespacedName) []string { return []string{infrav1.ClusterFinalizer} },
	"SimulatedMachinePool": func(types.NamespacedName) []string { return []string{infrav1.MachinePoolFinalizer} },
}
