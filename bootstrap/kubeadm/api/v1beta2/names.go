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
	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// The names this provider writes and reads beside its types: on the objects
// it reads and writes, on bootstrap tokens in workload clusters, in
// conditions and events, and on machines. Whoever else reads them (tests,
// tools, other controllers) takes them from here.

// Annotations that choose what a KubeadmConfig renders where its spec cannot
// say it: KubeadmControlPlane's spec allows only cloud-config and ignition
// and rolls its machines out on any spec difference, but it copies
// spec.machineTemplate.metadata's annotations onto every KubeadmConfig it
// creates (and keeps them in sync without a rollout). The spec KCP wrote
// stays as it wrote it; docs/user/topologies.md describes both.
const (
	// FormatAnnotation chooses the format of a KubeadmConfig whose spec has
	// the default, cloud-config (e.g. "raw" for a KCP control plane).
	FormatAnnotation = "bootstrap.cluster.x-k8s.io/format"
	// IgnitionButaneAnnotation carries a Butane document used as
	// spec.ignition.butane.additionalConfig when the format is ignition.
	IgnitionButaneAnnotation = "bootstrap.cluster.x-k8s.io/ignition-butane"
)

// Annotations and keys of a KubeadmConfig's data secret.
const (
	// BootstrapTokenIDAnnotation names the bootstrap token (its public ID)
	// the data carries when a provider made it: the controller looks after
	// it until the owner joins.
	BootstrapTokenIDAnnotation = "bootstrap.cluster.x-k8s.io/bootstrap-token-id"
	// BootstrapTokenHashAnnotation is that token's SHA-256 ("<id>.<secret>",
	// hex), secret half included: the spec's token is the data's only if
	// the hashes agree. On the KubeadmConfig itself it records the token the
	// controller wrote into the spec, so that the token is known as the
	// provider's own after a move or a restore gave the config a new UID.
	BootstrapTokenHashAnnotation = "bootstrap.cluster.x-k8s.io/bootstrap-token-sha256"
	// PreviousBootstrapTokenIDAnnotation and PreviousBootstrapTokenHashAnnotation
	// name, on a MachinePool's data secret, the token its data carried
	// before the last rotation: instances launched from that data may still
	// be joining with it, so it is kept valid while the pool has instances
	// that have not joined.
	PreviousBootstrapTokenIDAnnotation   = "bootstrap.cluster.x-k8s.io/previous-bootstrap-token-id"
	PreviousBootstrapTokenHashAnnotation = "bootstrap.cluster.x-k8s.io/previous-bootstrap-token-sha256"
	// ConfigGenerationAnnotation is the generation of the KubeadmConfig the
	// data was rendered from: a MachinePool's data is rendered again when
	// its config's spec changes (ClusterClass patches a pool's config in
	// place), so that the pool's next instances get the change.
	ConfigGenerationAnnotation = "bootstrap.cluster.x-k8s.io/config-generation"
	// ConfigUIDAnnotation is the UID of the KubeadmConfig whose generation
	// ConfigGenerationAnnotation counts: clusterctl move and restores create
	// the config anew, its generation starting again, which is no spec change.
	ConfigUIDAnnotation = "bootstrap.cluster.x-k8s.io/config-uid"
	// PreviousDataSecretAnnotation names, on a MachinePool's data secret,
	// the data secret of the pool's previous revision. A MachinePool's data
	// secret is named after its config and a digest of the data apart from
	// its token, so a spec change gives it a new name the infrastructure can
	// roll on; the previous one stays while instances may boot from it.
	PreviousDataSecretAnnotation = "bootstrap.cluster.x-k8s.io/previous-data-secret"
	// LegacyBootstrapTokenKey held the token in the data secrets of earlier
	// versions of this provider; it is read once, to move the token into
	// the spec.
	LegacyBootstrapTokenKey = "bootstrap-token"
)

// Bootstrap token Secrets in workload clusters.
const (
	// BootstrapTokenConfigUIDLabel marks a token Secret with the UID of the
	// KubeadmConfig it was made for, so that a retried create finds what an
	// interrupted one made. It proves nothing after a move (new UIDs).
	BootstrapTokenConfigUIDLabel = "bootstrap.cluster.x-k8s.io/kubeadm-config-uid"
	// BootstrapTokenDescription is what upstream's kubeadm bootstrap
	// provider writes into the token Secrets it creates; this provider
	// writes the same words (followed by the config's name), so either
	// provider can tell the tokens a provider made from the ones people made.
	BootstrapTokenDescription = "token generated by cluster-api-bootstrap-provider-kubeadm"
)

// InitLockName is the ConfigMap that lets one control-plane machine of
// clusterName run kubeadm init: upstream's name and content, so that a lock
// taken under either provider is honoured by the other.
func InitLockName(clusterName string) string { return clusterName + "-lock" }

// Reasons of the DataSecretAvailable and CertificatesAvailable conditions
// beyond upstream's. Every state a KubeadmConfig can wait or fail in has its
// own reason, so `kubectl get kubeadmconfig -o wide` and alerts can tell them
// apart; the message says what to do. docs/reference/controller.md describes each.
const (
	KubeadmConfigOwnerNotFoundReason                   = "OwnerNotFound"
	KubeadmConfigMachinePoolFeatureDisabledReason      = "MachinePoolFeatureDisabled"
	KubeadmConfigClusterNotFoundReason                 = "ClusterNotFound"
	KubeadmConfigWaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	KubeadmConfigWaitingForControlPlaneInitReason      = "WaitingForControlPlaneInitialization"
	KubeadmConfigWaitingForInitLockReason              = "WaitingForInitLock"
	KubeadmConfigWaitingForControlPlaneEndpointReason  = "WaitingForControlPlaneEndpoint"
	KubeadmConfigInvalidKubernetesVersionReason        = "InvalidKubernetesVersion"
	KubeadmConfigFormatFeatureDisabledReason           = "FormatFeatureDisabled"
	KubeadmConfigReferencedSecretNotFoundReason        = "ReferencedSecretNotFound"
	KubeadmConfigControlPlaneVersionUnavailableReason  = "ControlPlaneVersionUnavailable"
	KubeadmConfigFileTemplateFailedReason              = "FileTemplateFailed"
	KubeadmConfigWorkloadClusterUnreachableReason      = "WorkloadClusterUnreachable"
	KubeadmConfigBootstrapTokenFailedReason            = "BootstrapTokenFailed"
	KubeadmConfigInvalidConfigurationReason            = "InvalidConfiguration"
	KubeadmConfigRenderFailedReason                    = "RenderFailed"
	KubeadmConfigContentTooLargeReason                 = "ContentTooLarge"
	KubeadmConfigDataSecretConflictReason              = "DataSecretConflict"
	KubeadmConfigDataSecretMissingReason               = "DataSecretMissing"
	KubeadmConfigCertificatesMissingReason             = "CertificatesMissing"
	KubeadmConfigCertificatesCorruptedReason           = "CertificatesCorrupted"
)

// KubeadmConfigBootstrapDataSizeWithinLimitCondition says whether the
// bootstrap data fits the size the manager was told the infrastructure takes
// (--bootstrap-data-size-limit).
const (
	KubeadmConfigBootstrapDataSizeWithinLimitCondition = "BootstrapDataSizeWithinLimit"
	KubeadmConfigBootstrapDataSizeWithinLimitReason    = "WithinLimit"
	// KubeadmConfigBootstrapDataTooLargeReason is the data over that size,
	// or (on DataSecretAvailable) over what a Secret holds.
	KubeadmConfigBootstrapDataTooLargeReason = "BootstrapDataTooLarge"
)

// Upstream's reasons this provider sets too, under the names above.
const (
	KubeadmConfigDataSecretAvailableReason   = upstreambootstrapv1.KubeadmConfigDataSecretAvailableReason
	KubeadmConfigCertificatesAvailableReason = upstreambootstrapv1.KubeadmConfigCertificatesAvailableReason
	// KubeadmConfigInternalErrorReason: an API call failed; the controller retries.
	KubeadmConfigInternalErrorReason = upstreambootstrapv1.KubeadmConfigCertificatesAvailableInternalErrorReason
)

// Reasons of the events the controller records on KubeadmConfigs.
const (
	ControlPlaneInitDataEvent    = "ControlPlaneInitData"
	BootstrapDataUpdatedEvent    = "BootstrapDataUpdated"
	DataSecretMissingEvent       = KubeadmConfigDataSecretMissingReason
	BootstrapTokenRecreatedEvent = "BootstrapTokenRecreated"
	BootstrapTokenRotatedEvent   = "BootstrapTokenRotated"
	BootstrapTokenAdoptedEvent   = "BootstrapTokenAdopted"
)

// InPlaceUpdateFailedEvent is the reason of the event the in-place update
// extension records on a Machine whose update failed on its node, with the
// step that failed: Cluster API's own condition only says that the hook
// failed.
const InPlaceUpdateFailedEvent = "InPlaceUpdateFailed"

// Paths and the unit of the ignition format on a Flatcar machine. Extra
// Ignition configuration may not replace them.
const (
	// IgnitionKubeadmConfigPath is where kubeadm's configuration goes.
	// Ignition runs before /run is mounted, so the upstream /run/kubeadm
	// paths would be hidden.
	IgnitionKubeadmConfigPath = "/etc/kubeadm.yml"
	// IgnitionKubeadmScriptPath is the script the kubeadm unit runs.
	IgnitionKubeadmScriptPath = "/etc/kubeadm.sh"
	// IgnitionKubeadmDoneMarker makes the unit run once: it is written right
	// after kubeadm succeeds.
	IgnitionKubeadmDoneMarker = "/etc/kubeadm.done"
	// IgnitionKubeadmUnit is the oneshot unit that bootstraps the node.
	IgnitionKubeadmUnit = "kubeadm.service"
	// IgnitionMetadataEnvFile is where Flatcar's Afterburn
	// (coreos-metadata.service) writes the machine's metadata as environment
	// variables, for commands to read.
	IgnitionMetadataEnvFile = "/run/metadata/flatcar"
)
