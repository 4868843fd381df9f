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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

const (
	// NodeUpdateKind identifies the NodeUpdate document.
	NodeUpdateKind = "NodeUpdate"
	// NodeUpdateKey is the key of the Secret that carries a NodeUpdate to
	// the machine.
	NodeUpdateKey = "node-update.json"

	// NodeUpdateNamespace holds, in the workload cluster, each update's
	// Secret and the Pod that runs it on its node.
	NodeUpdateNamespace = "kube-system"
	// NodeUpdateNodeLabel marks an update's Secret and Pod with a hash of
	// their node's name (names may be longer than a label value).
	NodeUpdateNodeLabel = "bootstrap.cluster.x-k8s.io/node-update"
	// NodeUpdateMountPath is where the Pod finds the Secret, and
	// NodeUpdateHostPath the node's root file system.
	NodeUpdateMountPath = "/run/node-update"
	NodeUpdateHostPath  = "/host"
	// NodeUpdaterCommand is the node updater in the manager's image, which
	// the Pod runs as root.
	NodeUpdaterCommand = "/node-updater"
)

// NodeUpdate is an in-place update of a machine that has joined: what it
// must change so that it ends as a machine freshly bootstrapped from its
// KubeadmConfig's current spec would. It is the plan of that spec without
// discovery, token or keys. Every format's machines take the same document.
type NodeUpdate struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Digest identifies the state the update leads to: the SHA-256 of the
	// document with an empty digest. A result names it.
	Digest string `json:"digest"`
	// ControlPlane says that the machine runs the control plane: kubeadm
	// writes its static Pod manifests again from the cluster's
	// kubeadm-config ConfigMap.
	ControlPlane bool `json:"controlPlane"`
	// KubernetesVersion is the machine's version. A node of another
	// version moves to it: its kubeadm and kubelet from Binaries, then
	// kubeadm upgrades the node.
	KubernetesVersion string `json:"kubernetesVersion"`
	// Binaries says where the node gets the kubeadm and kubelet of
	// KubernetesVersion when it runs another version; absent when the
	// operator named no source, and then a node of another version fails.
	Binaries *KubernetesBinaries `json:"binaries,omitempty"`
	// Files are the spec's files, in spec order.
	Files []UpdateFile `json:"files"`
	// KubeletExtraArgs are the kubelet flags the spec gives besides
	// kubeadm's own (nodeRegistration.kubeletExtraArgs), in spec order.
	KubeletExtraArgs []Arg `json:"kubeletExtraArgs,omitempty"`
	// Placeholders are the texts of templated flags that stand for the
	// machine's metadata, for a flag the machine does not have yet.
	Placeholders []Placeholder `json:"placeholders,omitempty"`
	// PatchesDirectory is where kubeadm reads its patches from; empty when
	// the spec sets none.
	PatchesDirectory string `json:"patchesDirectory,omitempty"`
}

// ComputeDigest returns the digest of the document: the SHA-256 of its
// JSON with an empty digest.
func (u *NodeUpdate) ComputeDigest() (string, error) {
	unsigned := *u
	unsigned.Digest = ""
	b, err := json.Marshal(&unsigned)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// KubernetesBinaries is a source of Kubernetes release binaries laid out
// as dl.k8s.io lays them out: URL/<version>/bin/linux/<arch>/<name>, with
// its SHA-256 in hexadecimal at the same path plus ".sha256".
type KubernetesBinaries struct {
	URL string `json:"url"`
}

// UpdateFile is one file as it must be on disk.
type UpdateFile struct {
	// Path is absolute.
	Path string `json:"path"`
	// Owner is user[:group]; empty means root.
	Owner string `json:"owner,omitempty"`
	// Permissions is octal; empty means 0644.
	Permissions string `json:"permissions,omitempty"`
	// Content is the bytes on disk (base64 in JSON).
	Content []byte `json:"content"`
	// Append adds Content at the end of the file, once.
	Append bool `json:"append,omitempty"`
}

// Arg is one command-line flag, --name=value.
type Arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Templated says that the value holds Jinja that the machine's first
	// boot filled with its own facts (its instance id, say), which do not
	// change: the machine keeps the value its flag has.
	Templated bool `json:"templated,omitempty"`
}

// NodeUpdateResult is how an update ended on the machine. Message says
// what failed without file contents, tokens or keys.
type NodeUpdateResult struct {
	Digest string `json:"digest"`
	// Step is the step that failed, empty on success.
	Step    UpdateStep `json:"step,omitempty"`
	Message string     `json:"message,omitempty"`
}

// UpdateStep is one step of a NodeUpdate, in the order they run.
type UpdateStep string

const (
	// StepRead reads and checks the document.
	StepRead UpdateStep = "read"
	// StepFiles writes the files.
	StepFiles UpdateStep = "files"
	// StepBinaries installs the kubeadm and kubelet of the update's
	// Kubernetes version, when the node runs another one.
	StepBinaries UpdateStep = "binaries"
	// StepControlPlane writes the control plane's static Pod manifests
	// (control-plane machines only).
	StepControlPlane UpdateStep = "control-plane"
	// StepKubeletConfig writes the kubelet's configuration and flags.
	StepKubeletConfig UpdateStep = "kubelet-config"
	// StepKubeletRestart restarts the kubelet.
	StepKubeletRestart UpdateStep = "kubelet-restart"
)
