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

// Package kubeadmconfig is the KubeadmConfig controller: for each KubeadmConfig
// owned by a Machine or MachinePool it gathers what the bootstrap plan needs
// (Cluster facts, certificates, referenced secrets, a bootstrap token in the
// workload cluster), has the plan and the format's renderer compute the
// bootstrap data, and writes it to the data secret Cluster API hands to the
// machine. It then keeps the machine's bootstrap token alive until the Node
// joins and deletes it afterwards. The plan and the renderers stay pure; all
// API traffic is here.
//
// # Inputs
//
// gatherInputs (inputs.go) is the one place where the reconciler gathers
// what a plan is computed from: the action, the Cluster's facts, the
// certificates, the secrets the spec references and the control-plane
// version. Whoever created the KubeadmConfig (this provider, upstream's, a
// restore), the same objects give the same inputs. The bootstrap token is
// added by the caller, because getting one writes to the workload cluster.
//
// # Token upkeep
//
// Which bootstrap token belongs to a KubeadmConfig, keeping it valid while
// its machine boots, rotating a MachinePool's, deleting it once used
// (tokens.go).
//
// The one record of a config's token is where upstream's provider keeps it,
// spec.joinConfiguration.discovery.bootstrapToken.token: it moves with the
// config (clusterctl move, restores with new UIDs), upstream's provider reads
// and maintains it after a swap back, and the tokens upstream's provider
// wrote there are found after a swap to this one. But anyone who may patch a
// KubeadmConfig can write there, so the spec alone never makes the provider
// write a token's secret into a workload cluster. It looks after the spec's
// token (extends it, writes it again once the token cleaner removed it) only
// when it is vouched for:
//   - the data secret records its hash (bootstrapv1.BootstrapTokenHashAnnotation):
//     the data was rendered with exactly this token, made or adopted by this
//     provider;
//   - or the workload cluster holds it, with the same secret half, made by a
//     provider (this one, or upstream's before a swap): checked at the first
//     look of each process and remembered; a MachinePool's data secret then
//     gets the annotations, so that a rotation interrupted later is seen.
//
// A spec token the workload cluster does not hold is never created from the
// spec: a MachinePool's is replaced by a new token (as upstream's provider
// does), a Machine's before its data exists too if it is the one this config
// derived (it expired before the data was written); any other is a person's.
package kubeadmconfig
