// Package v1beta2 holds the KubeadmConfig and KubeadmConfigTemplate API of this
// provider. It is schema-compatible with upstream Cluster API's
// bootstrap.cluster.x-k8s.io/v1beta2 and reuses upstream's nested types, so
// objects written by upstream clients are accepted unchanged; what it adds is
// the `raw` format and `spec.ignition.butane`.
// +kubebuilder:object:generate=true
// +groupName=bootstrap.cluster.x-k8s.io
package v1beta2
