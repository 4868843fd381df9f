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

// Package v1beta2 holds the KubeadmConfig and KubeadmConfigTemplate API of this
// provider. It is schema-compatible with upstream Cluster API's
// bootstrap.cluster.x-k8s.io/v1beta2 and reuses upstream's nested types, so
// objects written by upstream clients are accepted unchanged; what it adds is
// the `raw` format and `spec.ignition.butane`.
// +kubebuilder:object:generate=true
// +groupName=bootstrap.cluster.x-k8s.io
package v1beta2
