// Package v1alpha1 holds the documents of the `raw` bootstrap format, for the
// agents of agent-based infrastructure providers that read them.
//
// A raw data secret carries kubeadm's configuration stream under the usual
// `value` key and, when kubeadm needs files on disk before it runs, a
// BootstrapFiles document under FilesKey. docs/raw-format.md describes both;
// pkg/rawagent is a ready-made agent.
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

// BootstrapFiles lists files an agent writes before running kubeadm.
type BootstrapFiles struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Action is what the configuration in `value` is for.
	Action Action `json:"action"`
	Files  []File `json:"files"`
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
