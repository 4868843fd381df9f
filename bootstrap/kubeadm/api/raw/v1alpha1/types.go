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

// Package v1alpha1 holds the documents of the `raw` bootstrap format, for the
// agents of agent-based infrastructure providers that read them.
//
// A raw data secret carries kubeadm's configuration stream under the usual
// `value` key and, when kubeadm needs files on disk before it runs, a
// BootstrapFiles document under FilesKey. docs/agents/raw-format.md describes both;
// pkg/rawagent is a ready-made agent.
//
// NodeUpdate is the document an in-place update brings to a machine of any
// format that has joined, and NodeUpdateResult how it ended there.
package v1alpha1

const (
	// FilesKey is the data secret key holding the BootstrapFiles document.
	FilesKey = "files"
	// ValueKey and FormatKey are Cluster API's data secret keys.
	ValueKey  = "value"
	FormatKey = "format"

	// GroupVersion and FilesKind identify the BootstrapFiles document.
	GroupVersion = "raw.bootstrap.cluster.x-k8s.io/v1alpha1"
	FilesKind    = "BootstrapFiles"

	// SuccessSentinel is the file every Cluster API bootstrap writes once
	// kubeadm succeeded; infrastructure providers may check for it.
	SuccessSentinel = "/run/cluster-api/bootstrap-success.complete"
)

// Action is the kubeadm action a raw configuration is for.
type Action string

const (
	ActionInit             Action = "init"
	ActionJoinControlPlane Action = "join-control-plane"
	ActionJoin             Action = "join"
)

// MetadataKey names one fact about the machine that only the machine (or its
// agent) knows when the bootstrap data is written, e.g. its hostname. Keys
// follow the EC2 / NoCloud meta-data names that cloud-init templates use.
type MetadataKey string

const (
	// MetadataLocalHostname is the machine's hostname ({{ ds.meta_data.local_hostname }}).
	MetadataLocalHostname MetadataKey = "local-hostname"
	// MetadataInstanceID is the infrastructure's id for the machine ({{ ds.meta_data.instance_id }}).
	MetadataInstanceID MetadataKey = "instance-id"
	// MetadataLocalIPv4 is the machine's private IPv4 address ({{ ds.meta_data.local_ipv4 }}).
	MetadataLocalIPv4 MetadataKey = "local-ipv4"
)

// MetadataValuePattern is what a metadata value may hold (an extended regular
// expression, for Go and bash alike): it replaces a placeholder inside YAML,
// within whatever quotes the configuration put around it, so it must not
// carry quotes, spaces or YAML indicators.
const MetadataValuePattern = `^[A-Za-z0-9._:-]+$`

// MetadataKeys lists every key, in documentation order.
var MetadataKeys = []MetadataKey{MetadataLocalHostname, MetadataInstanceID, MetadataLocalIPv4}

// BootstrapFiles is what an agent must do besides handing `value` to
// kubeadm: write files before kubeadm runs, and fill placeholders.
type BootstrapFiles struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Action is what the configuration in `value` is for.
	Action Action `json:"action"`
	Files  []File `json:"files"`
	// Placeholders are texts in `value` that the agent replaces, everywhere
	// they occur, with the machine's metadata before running kubeadm (the
	// spec used cloud-init's {{ ds.meta_data.* }}, which kubeadm would take
	// verbatim).
	Placeholders []Placeholder `json:"placeholders,omitempty"`
}

// Placeholder is one text of `value` that stands for machine metadata.
type Placeholder struct {
	// Text is the exact text in `value`, e.g. "{{ ds.meta_data.local_hostname }}".
	Text string `json:"text"`
	// Metadata is what replaces it.
	Metadata MetadataKey `json:"metadata"`
}

// File is one file; its content is text (PEM certificates and keys, kubeconfig).
type File struct {
	// Path is absolute.
	Path string `json:"path"`
	// Owner is user[:group]; empty means root.
	Owner string `json:"owner,omitempty"`
	// Permissions is octal, e.g. "0600"; empty means 0644 as for any file
	// kubeadm has not created itself.
	Permissions string `json:"permissions,omitempty"`
	Content     string `json:"content"`
}
