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

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Format selects the kind of bootstrap data the provider renders.
// +kubebuilder:validation:Enum=cloud-config;ignition;raw
type Format string

const (
	// CloudConfig renders cloud-init user data (#cloud-config). It is the default.
	CloudConfig Format = "cloud-config"
	// Ignition renders an Ignition v3 config for Flatcar Container Linux.
	Ignition Format = "ignition"
	// Raw renders only kubeadm's own configuration, for agents that run kubeadm themselves.
	Raw Format = "raw"
)

// Formats lists every supported format, in documentation order.
var Formats = []Format{CloudConfig, Ignition, Raw}

// EffectiveFormat returns the format the spec asks for, applying the default.
func (s *KubeadmConfigSpec) EffectiveFormat() Format {
	if s.Format == "" {
		return CloudConfig
	}
	return s.Format
}

// KubeadmConfigSpec is the desired state of a KubeadmConfig: the kubeadm
// configuration for init or join, plus what the machine needs around kubeadm.
// +kubebuilder:validation:MinProperties=1
type KubeadmConfigSpec struct {
	// clusterConfiguration is the cluster-wide kubeadm configuration used together with initConfiguration by `kubeadm init`.
	// +optional
	ClusterConfiguration upstreambootstrapv1.ClusterConfiguration `json:"clusterConfiguration,omitempty,omitzero"`

	// initConfiguration is the node-specific kubeadm configuration for `kubeadm init`.
	// +optional
	InitConfiguration upstreambootstrapv1.InitConfiguration `json:"initConfiguration,omitempty,omitzero"`

	// joinConfiguration is the kubeadm configuration for `kubeadm join`.
	// +optional
	JoinConfiguration upstreambootstrapv1.JoinConfiguration `json:"joinConfiguration,omitempty,omitzero"`

	// files lists extra files to write on the machine before kubeadm runs.
	// Not supported by the raw format.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=200
	Files []upstreambootstrapv1.File `json:"files,omitempty"`

	// diskSetup describes partition tables and file systems to create.
	// Not supported by the raw format.
	// +optional
	DiskSetup upstreambootstrapv1.DiskSetup `json:"diskSetup,omitempty,omitzero"`

	// mounts lists mount points to set up.
	// Not supported by the raw format.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Mounts []upstreambootstrapv1.MountPoints `json:"mounts,omitempty"`

	// bootCommands run very early during boot (cloud-init bootcmd, on every boot).
	// Only the cloud-config format supports them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=10240
	BootCommands []string `json:"bootCommands,omitempty"`

	// preKubeadmCommands run right before kubeadm.
	// Not supported by the raw format.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=10240
	PreKubeadmCommands []string `json:"preKubeadmCommands,omitempty"`

	// postKubeadmCommands run right after kubeadm.
	// Not supported by the raw format.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=10240
	PostKubeadmCommands []string `json:"postKubeadmCommands,omitempty"`

	// users lists extra OS users to create.
	// Not supported by the raw format.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Users []upstreambootstrapv1.User `json:"users,omitempty"`

	// ntp configures time synchronisation.
	// Not supported by the raw format.
	// +optional
	NTP upstreambootstrapv1.NTP `json:"ntp,omitempty,omitzero"`

	// format selects the bootstrap data format: cloud-config (the default when empty),
	// ignition, or raw (kubeadm configuration only). ignition and raw are each behind
	// a feature gate.
	// +optional
	Format Format `json:"format,omitempty"`

	// verbosity sets kubeadm's log level (its --v flag).
	// Not supported by the raw format, where the agent runs kubeadm.
	// +optional
	Verbosity *int32 `json:"verbosity,omitempty"`

	// ignition holds settings that only apply to the ignition format.
	// +optional
	Ignition IgnitionSpec `json:"ignition,omitempty,omitzero"`

	// gzipUserData delivers the bootstrap data gzip-compressed, in the form its
	// consumer reads natively: gzipped user data for cloud-init; for ignition, a
	// small config that replaces itself with the full one from a gzip-compressed
	// data URL. For infrastructure whose user data is size-limited (AWS EC2 takes
	// 16 KiB). Not supported by the raw format.
	// +optional
	GzipUserData *bool `json:"gzipUserData,omitempty"`
}

// IgnitionSpec holds settings that only apply to the ignition format.
// +kubebuilder:validation:MinProperties=1
type IgnitionSpec struct {
	// containerLinuxConfig is extra configuration in the legacy Container Linux Config
	// format, merged into the generated Ignition config. Mutually exclusive with butane.
	// +optional
	ContainerLinuxConfig upstreambootstrapv1.ContainerLinuxConfig `json:"containerLinuxConfig,omitempty,omitzero"`

	// butane is extra configuration written as Butane YAML (Flatcar variant),
	// translated to Ignition and merged into the generated config.
	// Mutually exclusive with containerLinuxConfig.
	// +optional
	Butane ButaneConfig `json:"butane,omitempty,omitzero"`
}

// IsDefined reports whether any ignition setting is present.
func (r *IgnitionSpec) IsDefined() bool {
	return *r != IgnitionSpec{}
}

// ButaneConfig is extra Ignition configuration written in Butane.
// +kubebuilder:validation:MinProperties=1
type ButaneConfig struct {
	// additionalConfig is a Butane document (variant flatcar). Its variant and version
	// fields may be omitted; the provider's supported Flatcar Butane version is assumed.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32768
	AdditionalConfig string `json:"additionalConfig,omitempty"`

	// strict turns every Butane translation warning into an error.
	// +optional
	Strict *bool `json:"strict,omitempty"`
}

// IsDefined reports whether any Butane setting is present.
func (r *ButaneConfig) IsDefined() bool {
	return *r != ButaneConfig{}
}

// KubeadmConfigStatus is the observed state of a KubeadmConfig, following the
// Cluster API v1beta2 bootstrap provider contract.
// +kubebuilder:validation:MinProperties=1
type KubeadmConfigStatus struct {
	// conditions describe the current state of the KubeadmConfig
	// (Ready, DataSecretAvailable, CertificatesAvailable, Paused).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization reports the contract fields Cluster API uses to provision the Machine.
	// +optional
	Initialization upstreambootstrapv1.KubeadmConfigInitializationStatus `json:"initialization,omitempty,omitzero"`

	// dataSecretName names the Secret that holds the bootstrap data.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DataSecretName string `json:"dataSecretName,omitempty"`

	// observedGeneration is the last metadata.generation the controller acted on.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// deprecated keeps the v1beta1-era status fields for as long as upstream keeps them.
	// +optional
	Deprecated *upstreambootstrapv1.KubeadmConfigDeprecatedStatus `json:"deprecated,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubeadmconfigs,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the config belongs to"
// +kubebuilder:printcolumn:name="Format",type="string",JSONPath=".spec.format",description="Bootstrap data format (empty means cloud-config)"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Data secret created",type="string",JSONPath=`.status.initialization.dataSecretCreated`,description="Whether the bootstrap data secret exists"
// +kubebuilder:printcolumn:name="Data secret",type="string",JSONPath=".status.dataSecretName",description="Secret holding the bootstrap data"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// KubeadmConfig describes how one machine is bootstrapped with kubeadm.
type KubeadmConfig struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired bootstrap configuration.
	// +optional
	Spec KubeadmConfigSpec `json:"spec,omitempty,omitzero"`
	// status is the observed state.
	// +optional
	Status KubeadmConfigStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the v1beta2 conditions (metav1.Condition).
func (c *KubeadmConfig) GetConditions() []metav1.Condition {
	return c.Status.Conditions
}

// SetConditions replaces the v1beta2 conditions.
func (c *KubeadmConfig) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// GetV1Beta1Conditions returns the deprecated v1beta1 conditions.
func (c *KubeadmConfig) GetV1Beta1Conditions() clusterv1.Conditions {
	if c.Status.Deprecated == nil || c.Status.Deprecated.V1Beta1 == nil {
		return nil
	}
	return c.Status.Deprecated.V1Beta1.Conditions
}

// SetV1Beta1Conditions replaces the deprecated v1beta1 conditions.
func (c *KubeadmConfig) SetV1Beta1Conditions(conditions clusterv1.Conditions) {
	if c.Status.Deprecated == nil {
		c.Status.Deprecated = &upstreambootstrapv1.KubeadmConfigDeprecatedStatus{}
	}
	if c.Status.Deprecated.V1Beta1 == nil {
		c.Status.Deprecated.V1Beta1 = &upstreambootstrapv1.KubeadmConfigV1Beta1DeprecatedStatus{}
	}
	c.Status.Deprecated.V1Beta1.Conditions = conditions
}

// +kubebuilder:object:root=true

// KubeadmConfigList is a list of KubeadmConfigs.
type KubeadmConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the KubeadmConfigs.
	Items []KubeadmConfig `json:"items"`
}
