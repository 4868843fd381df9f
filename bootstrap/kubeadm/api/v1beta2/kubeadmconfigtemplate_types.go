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

package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// KubeadmConfigTemplateSpec is the desired state of a KubeadmConfigTemplate.
type KubeadmConfigTemplateSpec struct {
	// template is stamped out into a KubeadmConfig for every Machine created from it.
	// +required
	Template KubeadmConfigTemplateResource `json:"template,omitempty,omitzero"`
}

// KubeadmConfigTemplateResource is the KubeadmConfig that a template produces.
// +kubebuilder:validation:MinProperties=1
type KubeadmConfigTemplateResource struct {
	// metadata holds labels and annotations copied to each generated KubeadmConfig.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the KubeadmConfig spec each generated KubeadmConfig gets.
	// +optional
	Spec KubeadmConfigSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubeadmconfigtemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="ClusterClass",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="ClusterClass")].name`,description="ClusterClass that owns the template"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="Cluster")].name`,description="Cluster that owns the template"
// +kubebuilder:printcolumn:name="Format",type="string",JSONPath=".spec.template.spec.format",description="Bootstrap data format (empty means cloud-config)"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// KubeadmConfigTemplate is a template for KubeadmConfigs, used by MachineDeployments,
// MachinePools and ClusterClasses.
type KubeadmConfigTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +optional
	Spec KubeadmConfigTemplateSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// KubeadmConfigTemplateList is a list of KubeadmConfigTemplates.
type KubeadmConfigTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the KubeadmConfigTemplates.
	Items []KubeadmConfigTemplate `json:"items"`
}
