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

// Package plan computes, once and independently of the output format, what a
// machine needs to join a cluster with kubeadm: the kubeadm action and its
// configuration documents, the certificates and files to write, the commands
// around kubeadm, users, time sync and storage. Every renderer (cloud-init,
// Ignition, raw) is a translation of a Plan and nothing else; nothing here
// talks to an API server: the caller resolves secrets through Input.ReadSecret.
package plan

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/placeholders"
)

// Action is what kubeadm does on the machine.
type Action string

const (
	// ActionInit initialises the first control-plane machine (`kubeadm init`).
	ActionInit Action = "init"
	// ActionJoinControlPlane joins a further control-plane machine (`kubeadm join` with controlPlane).
	ActionJoinControlPlane Action = "join-control-plane"
	// ActionJoin joins a worker (`kubeadm join`).
	ActionJoin Action = "join"
)

// Actions lists every action.
var Actions = []Action{ActionInit, ActionJoinControlPlane, ActionJoin}

// IsControlPlane reports whether the machine runs the control plane.
func (a Action) IsControlPlane() bool { return a == ActionInit || a == ActionJoinControlPlane }

const (
	// SentinelPath is the file Cluster API's infrastructure providers probe to
	// learn that kubeadm finished successfully.
	SentinelPath = "/run/cluster-api/bootstrap-success.complete"
	// InitConfigPath and JoinConfigPath are where kubeadm's configuration is
	// written by formats that write it under /run (the upstream locations).
	InitConfigPath = "/run/kubeadm/kubeadm.yaml"
	JoinConfigPath = "/run/kubeadm/kubeadm-join-config.yaml"
)

// Plan is the format-neutral description of one machine's bootstrap.
type Plan struct {
	Format            bootstrapv1.Format
	Action            Action
	KubernetesVersion semver.Version
	Kubeadm           Kubeadm

	// Files are written before kubeadm runs: certificates first, then the
	// discovery kubeconfig (if any), then the user's files, in spec order.
	// The kubeadm configuration itself is Kubeadm.Documents.
	Files []File

	BootCommands        []string
	PreKubeadmCommands  []string
	PostKubeadmCommands []string

	Users       []User
	NTP         *upstreambootstrapv1.NTP
	Partitions  []upstreambootstrapv1.Partition
	Filesystems []upstreambootstrapv1.Filesystem
	Mounts      []upstreambootstrapv1.MountPoints

	// Ignition holds additional configuration only the Ignition renderer uses.
	Ignition bootstrapv1.IgnitionSpec

	// Compress asks for the whole output gzip-compressed, in the form the
	// format's consumer decompresses by itself (spec.gzipUserData).
	Compress bool
}

// Kubeadm is the kubeadm invocation.
type Kubeadm struct {
	// APIVersion is the kubeadm configuration API version the documents use,
	// chosen from the machine's Kubernetes version.
	APIVersion string
	// Documents are the kubeadm configuration documents, each a complete YAML
	// document with apiVersion and kind: ClusterConfiguration and
	// InitConfiguration for init; JoinConfiguration for joins.
	Documents []string
	// Verbosity is kubeadm's --v, when set.
	Verbosity *int32
	// PatchesDirectory is where kubeadm reads its patches from (the
	// action's configuration's patches.directory), empty when unset.
	PatchesDirectory string
	// KubeletExtraArgs are the action's nodeRegistration.kubeletExtraArgs,
	// which kubeadm writes beside its own kubelet flags.
	KubeletExtraArgs []upstreambootstrapv1.Arg
}

// ConfigYAML is the kubeadm configuration as one YAML stream.
func (k Kubeadm) ConfigYAML() string {
	return string(k.AppendConfigYAML(nil))
}

// AppendConfigYAML appends ConfigYAML to b.
func (k Kubeadm) AppendConfigYAML(b []byte) []byte {
	size := 0
	for _, d := range k.Documents {
		size += len(d) + 5
	}
	b = slices.Grow(b, size)
	for _, d := range k.Documents {
		b = append(b, "---\n"...)
		b = append(b, d...)
		if !strings.HasSuffix(d, "\n") {
			b = append(b, '\n')
		}
	}
	return b
}

// Placeholders returns the distinct Jinja constructs of the kubeadm
// configuration, in order. Formats without Jinja fill the supported ones;
// the error says that one is not supported (admission refuses those).
func (k Kubeadm) Placeholders() ([]placeholders.Placeholder, error) {
	var out []placeholders.Placeholder
	for _, d := range k.Documents {
		for _, ph := range placeholders.Find(d) {
			if !ph.Supported() {
				return nil, fmt.Errorf("the kubeadm configuration has Jinja that only cloud-init can render (supported without it: %s)", placeholders.SupportedSummary())
			}
			if !slices.Contains(out, ph) {
				out = append(out, ph)
			}
		}
	}
	return out, nil
}

// DefaultConfigPath is where formats that follow upstream's layout write the
// kubeadm configuration.
func (p *Plan) DefaultConfigPath() string {
	if p.Action == ActionInit {
		return InitConfigPath
	}
	return JoinConfigPath
}

// KubeadmArgs is the kubeadm command line reading its configuration from configPath.
func (p *Plan) KubeadmArgs(configPath string) []string {
	args := []string{"kubeadm", "init"}
	if p.Action != ActionInit {
		args[1] = "join"
	}
	args = append(args, "--config", configPath)
	if p.Kubeadm.Verbosity != nil {
		args = append(args, "--v", strconv.Itoa(int(*p.Kubeadm.Verbosity)))
	}
	return args
}

// KubeadmCommand is KubeadmArgs as a shell command line.
func (p *Plan) KubeadmCommand(configPath string) string {
	return strings.Join(p.KubeadmArgs(configPath), " ")
}

// SentinelCommand writes the success sentinel. The renderer makes sure the
// directory exists (how differs per format and OS).
func SentinelCommand() string {
	return "echo success > " + SentinelPath
}

// SentinelDir is the directory of SentinelPath.
const SentinelDir = "/run/cluster-api"

// FileKind says where a file comes from.
type FileKind string

const (
	// FileCertificate is cluster PKI material (CA certificates and keys, service-account keys).
	FileCertificate FileKind = "certificate"
	// FileDiscoveryKubeconfig is the kubeconfig kubeadm uses for file-based discovery.
	FileDiscoveryKubeconfig FileKind = "discovery-kubeconfig"
	// FileUser is a file from spec.files.
	FileUser FileKind = "user"
)

// File is one file to write on the machine.
type File struct {
	Kind        FileKind
	Path        string
	Owner       string
	Permissions string
	// Encoding says how Content is encoded (as in spec.files[].encoding); the
	// bytes on disk are Bytes().
	Encoding upstreambootstrapv1.Encoding
	Content  string
	Append   bool
	// Source names where the file came from (a field path such as
	// spec.files[2]); used in error messages, never the content.
	Source string
}

// Bytes returns the file's content as it must appear on disk.
func (f File) Bytes() ([]byte, error) {
	b, err := machinechecks.Decode(f.Encoding, f.Content)
	if err != nil {
		return nil, fmt.Errorf("%s: with encoding %s, the content %w", f.Source, f.Encoding, err)
	}
	return b, nil
}

// Mode is the file's permissions as a mode; ok is false when none are set.
func (f File) Mode() (mode int, ok bool, err error) {
	if f.Permissions == "" {
		return 0, false, nil
	}
	m, err := machinechecks.Mode(f.Permissions)
	if err != nil {
		return 0, false, fmt.Errorf("%s.permissions: %w", f.Source, err)
	}
	return int(m), true, nil
}

// OwnerParts splits Owner ("user", "user:group" or ":group").
func (f File) OwnerParts() (user, group string) {
	user, group, _ = strings.Cut(f.Owner, ":")
	return user, group
}

// User is spec.users[] with passwdFrom resolved into Passwd.
type User struct {
	upstreambootstrapv1.User
}

// Gzip compresses a whole output for Plan.Compress, at the best compression:
// the point is to fit size-limited user data.
func Gzip(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
