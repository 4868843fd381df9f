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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ClusterFinalizer and MachineFinalizer let the controllers release addresses
// and stop hosts before the objects go.
const (
	ClusterFinalizer = "simulatedcluster.infrastructure.simulated.cabpk-formats.io"
	MachineFinalizer = "simulatedmachine.infrastructure.simulated.cabpk-formats.io"
)

// SimulatedClusterSpec follows Cluster API's InfraCluster contract.
type SimulatedClusterSpec struct {
	// controlPlaneEndpoint is set by the controller: an address of the
	// simulated network that the first control-plane host takes.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`
}

// Initialization is Cluster API's initialization status.
type Initialization struct {
	// provisioned is true once the infrastructure is ready.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// SimulatedClusterStatus follows Cluster API's InfraCluster contract.
type SimulatedClusterStatus struct {
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`
}

// SimulatedCluster is the infrastructure of one workload cluster.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=".spec.controlPlaneEndpoint.host"
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=".status.initialization.provisioned"
type SimulatedCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SimulatedClusterSpec   `json:"spec,omitempty"`
	Status SimulatedClusterStatus `json:"status,omitempty"`
}

// SimulatedClusterList is a list of SimulatedCluster.
// +kubebuilder:object:root=true
type SimulatedClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimulatedCluster `json:"items"`
}

// SimulatedMachineSpec follows Cluster API's InfraMachine contract.
type SimulatedMachineSpec struct {
	// providerID is set by the controller once the host exists.
	// +optional
	ProviderID string `json:"providerID,omitempty"`

	// bootDelay delays the host's first boot: a slow machine.
	// +optional
	BootDelay *metav1.Duration `json:"bootDelay,omitempty"`

	// image names the machine image the host boots, one the Lab was given
	// besides its node image (a management cluster's nodes' image, with its
	// providers' images in the store); the node image when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Image string `json:"image,omitempty"`
}

// HostPhase is how far a simulated host got.
type HostPhase string

const (
	HostPending       HostPhase = "Pending"
	HostBooting       HostPhase = "Booting"
	HostBootstrapping HostPhase = "Bootstrapping"
	HostBootstrapped  HostPhase = "Bootstrapped"
	HostFailed        HostPhase = "Failed"
)

// SimulatedMachineStatus follows Cluster API's InfraMachine contract.
type SimulatedMachineStatus struct {
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// addresses of the host.
	// +optional
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// hostPhase is how far the host got in running its bootstrap data.
	// +optional
	HostPhase HostPhase `json:"hostPhase,omitempty"`

	// hostMessage says what the host is doing or why it failed.
	// +optional
	HostMessage string `json:"hostMessage,omitempty"`

	// consumer is the program that ran the bootstrap data on the host.
	// +optional
	Consumer string `json:"consumer,omitempty"`

	// conditions: Ready is True once the host ran its bootstrap data; while
	// it is False, its reason is the host's phase and its message says what
	// the host waits for or why it failed (e.g. the kubelet's own error).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SimulatedMachine is one simulated host.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=".spec.providerID"
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=".status.hostPhase"
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=".status.hostMessage",priority=1
type SimulatedMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SimulatedMachineSpec   `json:"spec,omitempty"`
	Status SimulatedMachineStatus `json:"status,omitempty"`
}

// SimulatedMachineList is a list of SimulatedMachine.
// +kubebuilder:object:root=true
type SimulatedMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimulatedMachine `json:"items"`
}

// SimulatedMachineTemplateResource is the template's content.
type SimulatedMachineTemplateResource struct {
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	Spec       SimulatedMachineSpec `json:"spec"`
}

// SimulatedMachineTemplateSpec follows Cluster API's InfraMachineTemplate contract.
type SimulatedMachineTemplateSpec struct {
	Template SimulatedMachineTemplateResource `json:"template"`
}

// SimulatedMachineTemplate is what MachineSets clone SimulatedMachines from.
// +kubebuilder:object:root=true
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type SimulatedMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SimulatedMachineTemplateSpec `json:"spec,omitempty"`
}

// SimulatedMachineTemplateList is a list of SimulatedMachineTemplate.
// +kubebuilder:object:root=true
type SimulatedMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimulatedMachineTemplate `json:"items"`
}

// SimulatedClusterTemplateResource is the template's content.
type SimulatedClusterTemplateResource struct {
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	Spec       SimulatedClusterSpec `json:"spec"`
}

// SimulatedClusterTemplateSpec follows Cluster API's InfraClusterTemplate contract.
type SimulatedClusterTemplateSpec struct {
	Template SimulatedClusterTemplateResource `json:"template"`
}

// SimulatedClusterTemplate is what a ClusterClass's topology clones a
// cluster's SimulatedCluster from.
// +kubebuilder:object:root=true
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type SimulatedClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SimulatedClusterTemplateSpec `json:"spec,omitempty"`
}

// SimulatedClusterTemplateList is a list of SimulatedClusterTemplate.
// +kubebuilder:object:root=true
type SimulatedClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimulatedClusterTemplate `json:"items"`
}

// MachinePoolFinalizer lets the controller stop a pool's hosts before it goes.
const MachinePoolFinalizer = "simulatedmachinepool.infrastructure.simulated.cabpk-formats.io"

// SimulatedMachinePoolSpec follows Cluster API's InfraMachinePool contract.
type SimulatedMachinePoolSpec struct {
	// providerIDList is set by the controller: the provider IDs of the
	// pool's instances, oldest first.
	// +optional
	ProviderIDList []string `json:"providerIDList,omitempty"`

	// bootDelay delays the first boot of each instance started from now
	// on: slow machines.
	// +optional
	BootDelay *metav1.Duration `json:"bootDelay,omitempty"`
}

// SimulatedInstance is one host of a pool.
type SimulatedInstance struct {
	// name is the instance's host name (and its node's name).
	Name string `json:"name"`

	// hostPhase is how far the host got in running its bootstrap data.
	// +optional
	HostPhase HostPhase `json:"hostPhase,omitempty"`

	// hostMessage says what the host is doing or why it failed.
	// +optional
	HostMessage string `json:"hostMessage,omitempty"`

	// consumer is the program that ran the bootstrap data on the host.
	// +optional
	Consumer string `json:"consumer,omitempty"`

	// dataSecretVersion is the resourceVersion of the pool's bootstrap data
	// secret the instance booted with (a rotated token changes it).
	// +optional
	DataSecretVersion string `json:"dataSecretVersion,omitempty"`

	// version is the Kubernetes version the instance booted with, the
	// MachinePool's at the time; empty when the pool's status was lost.
	// +optional
	Version string `json:"version,omitempty"`

	// dataSecretName is the name of the bootstrap data secret the instance
	// booted from, the MachinePool's at the time: a new name rolls the pool,
	// new content under the same name (a rotated token) does not. Empty
	// when the pool's status was lost.
	// +optional
	DataSecretName string `json:"dataSecretName,omitempty"`
}

// SimulatedMachinePoolStatus follows Cluster API's InfraMachinePool contract.
type SimulatedMachinePoolStatus struct {
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// ready mirrors initialization.provisioned: Cluster API v1.14's
	// MachinePool controller still reads the infrastructure's readiness
	// from status.ready.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// replicas is the number of instances.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// instances are the pool's hosts, oldest first.
	// +optional
	// +listType=map
	// +listMapKey=name
	Instances []SimulatedInstance `json:"instances,omitempty"`
}

// SimulatedMachinePool is a group of simulated hosts that share one
// bootstrap data secret, as a cloud's scaling group shares a launch
// template's user data.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=".status.initialization.provisioned"
type SimulatedMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SimulatedMachinePoolSpec   `json:"spec,omitempty"`
	Status SimulatedMachinePoolStatus `json:"status,omitempty"`
}

// SimulatedMachinePoolList is a list of SimulatedMachinePool.
// +kubebuilder:object:root=true
type SimulatedMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimulatedMachinePool `json:"items"`
}

// SimulatedMachinePoolTemplateResource is the template's content.
type SimulatedMachinePoolTemplateResource struct {
	// +optional
	ObjectMeta clusterv1.ObjectMeta     `json:"metadata,omitempty,omitzero"`
	Spec       SimulatedMachinePoolSpec `json:"spec"`
}

// SimulatedMachinePoolTemplateSpec follows Cluster API's
// InfraMachinePoolTemplate contract.
type SimulatedMachinePoolTemplateSpec struct {
	Template SimulatedMachinePoolTemplateResource `json:"template"`
}

// SimulatedMachinePoolTemplate is what a ClusterClass's topology creates a
// MachinePool's SimulatedMachinePool from.
// +kubebuilder:object:root=true
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type SimulatedMachinePoolTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SimulatedMachinePoolTemplateSpec `json:"spec,omitempty"`
}

// SimulatedMachinePoolTemplateList is a list of SimulatedMachinePoolTemplate.
// +kubebuilder:object:root=true
type SimulatedMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimulatedMachinePoolTemplate `json:"items"`
}
