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

// Package plantest provides fixed inputs for tests, fuzzing and benchmarks of
// the plan and its renderers: a committed test-only PKI (so outputs are
// stable), cluster facts, named feature specs and a seeded spec generator.
// The keys under testdata/pki are throwaway test material.
package plantest

import (
	"embed"
	"fmt"
	"math/rand/v2"
	"path"

	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
)

//go:embed testdata/pki
var pki embed.FS

// DiscoveryKubeconfigPath is where the file-discovery feature has the
// kubeconfig written. kubeadm's validation checks that the file exists, so
// validator tests write it there first, as the machine would; it lives under
// /tmp so that tests can.
const DiscoveryKubeconfigPath = "/tmp/cabpk-formats-test/discovery.conf"

// Token is the bootstrap token used in joins.
const Token = "abcdef.0123456789abcdef"

// Cluster is the cluster every test machine belongs to.
var Cluster = plan.Cluster{
	Name:                 "demo",
	ControlPlaneEndpoint: "10.0.0.1:6443",
	KubernetesVersion:    "v1.36.3",
	ControlPlaneVersion:  "v1.36.3",
	ServiceDomain:        "cluster.local",
	ServiceSubnet:        "10.96.0.0/12",
	PodSubnet:            "192.168.0.0/16",
}

// Secrets resolve contentFrom and passwdFrom in the feature specs.
var Secrets = map[plan.SecretRef][]byte{
	{Name: "extra", Key: "motd"}:     []byte("from a secret\n"),
	{Name: "users", Key: "ops-hash"}: []byte("$6$rounds=4096$salt$hash"),
}

// ReadSecret resolves Secrets.
func ReadSecret(ref plan.SecretRef) ([]byte, error) {
	if v, ok := Secrets[ref]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("no secret %s key %s", ref.Name, ref.Key)
}

// Certificates returns the committed PKI shaped for action and spec (the
// certificates' paths follow clusterConfiguration.certificatesDir).
func Certificates(action plan.Action, spec *bootstrapv1.KubeadmConfigSpec) secret.Certificates {
	c := plan.CertificatesFor(action, spec)
	if err := plan.LoadCertificates(c, action, func(rel string) ([]byte, error) {
		return pki.ReadFile(path.Join("testdata/pki", rel))
	}); err != nil {
		panic(err)
	}
	return c
}

// CACert is the test cluster CA certificate (PEM).
func CACert() []byte {
	b, err := pki.ReadFile("testdata/pki/ca.crt")
	if err != nil {
		panic(err)
	}
	return b
}

// Input assembles a plan input for spec and action.
func Input(spec *bootstrapv1.KubeadmConfigSpec, action plan.Action) plan.Input {
	return plan.Input{
		Spec: spec, Action: action, Cluster: Cluster, Certificates: Certificates(action, spec),
		BootstrapToken: Token, ReadSecret: ReadSecret,
	}
}

// Base returns the kubeadm part every spec starts from, for an action.
func Base(format bootstrapv1.Format, action plan.Action) *bootstrapv1.KubeadmConfigSpec {
	s := &bootstrapv1.KubeadmConfigSpec{Format: format}
	switch action {
	case plan.ActionInit:
		s.ClusterConfiguration.APIServer.CertSANs = []string{"api.example.com"}
		s.InitConfiguration.NodeRegistration.Name = "cp-0"
		s.InitConfiguration.LocalAPIEndpoint.AdvertiseAddress = "10.0.0.2"
	case plan.ActionJoinControlPlane:
		s.JoinConfiguration.NodeRegistration.Name = "cp-1"
		s.JoinConfiguration.ControlPlane = &upstreambootstrapv1.JoinControlPlane{
			LocalAPIEndpoint: upstreambootstrapv1.APIEndpoint{AdvertiseAddress: "10.0.0.3", BindPort: 6443},
		}
	case plan.ActionJoin:
		s.JoinConfiguration.NodeRegistration.Name = "worker-0"
		s.JoinConfiguration.NodeRegistration.KubeletExtraArgs = []upstreambootstrapv1.Arg{{Name: "node-labels", Value: ptr.To("tier=workers")}}
	}
	return s
}

// Feature adds one feature to a spec. Supports says which formats honour it.
type Feature struct {
	Name     string
	Formats  []bootstrapv1.Format
	Apply    func(s *bootstrapv1.KubeadmConfigSpec)
	Supports func(action plan.Action) bool
}

var allFormats = []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition, bootstrapv1.Raw}

// Features are the golden-test features; each lists the formats it applies to.
var Features = []Feature{
	{Name: "files", Formats: []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition}, Apply: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Files = []upstreambootstrapv1.File{
			{Path: "/etc/plain.conf", Content: "plain text\n", Owner: "root:root", Permissions: "0644"},
			{Path: "/etc/base64.conf", Content: "aGVsbG8gYmFzZTY0Cg==", Encoding: upstreambootstrapv1.Base64, Permissions: "0600"},
			{Path: "/etc/append.conf", Content: "appended line\n", Append: ptr.To(true)},
			{Path: "/etc/motd", ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "extra", Key: "motd"}}},
			{Path: "/etc/version", Content: "cp={{ .controlPlane.version }}\n", ContentFormat: upstreambootstrapv1.FileContentFormatTemplate},
		}
		if s.Format == bootstrapv1.CloudConfig {
			s.Files = append(s.Files,
				// gzip and gzip+base64 are cloud-config only (as upstream).
				upstreambootstrapv1.File{Path: "/etc/gzip-base64.conf", Content: "H4sIAAAAAAAC/0uvyixQSMxLUUhKLE41M+ECABsegXkQAAAA", Encoding: upstreambootstrapv1.GzipBase64},
			)
		}
	}},
	{Name: "users", Formats: []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition}, Apply: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Users = []upstreambootstrapv1.User{
			{Name: "ops", Gecos: "Operator", Groups: "wheel,docker", HomeDir: "/home/ops", Shell: "/bin/bash",
				Sudo: "ALL=(ALL) NOPASSWD:ALL", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO ops@example"},
				PasswdFrom: upstreambootstrapv1.PasswdSource{Secret: upstreambootstrapv1.SecretPasswdSource{Name: "users", Key: "ops-hash"}}, LockPassword: ptr.To(false)},
			{Name: "audit", PrimaryGroup: "audit", LockPassword: ptr.To(true)},
		}
	}},
	{Name: "ntp", Formats: []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition}, Apply: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.NTP = upstreambootstrapv1.NTP{Enabled: ptr.To(true), Servers: []string{"0.pool.ntp.org", "time.example.com"}}
	}},
	{Name: "disk-setup", Formats: []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition}, Apply: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.DiskSetup = upstreambootstrapv1.DiskSetup{
			Partitions:  []upstreambootstrapv1.Partition{{Device: "/dev/sdb", Layout: ptr.To(true), Overwrite: ptr.To(false), TableType: "gpt"}},
			Filesystems: []upstreambootstrapv1.Filesystem{{Device: "/dev/sdb1", Filesystem: "ext4", Label: "etcd_disk", Overwrite: ptr.To(false), ExtraOpts: []string{"-F", "-E", "lazy_itable_init=1"}}},
		}
		if s.Format == bootstrapv1.CloudConfig {
			s.DiskSetup.Partitions = append(s.DiskSetup.Partitions, upstreambootstrapv1.Partition{
				Device: "/dev/sdc", TableType: "mbr",
				DiskLayout: []upstreambootstrapv1.PartitionSpec{{Percentage: 60, PartitionType: "Linux"}, {Percentage: 30, PartitionType: "LinuxSwap"}, {Percentage: 10}},
			})
			s.DiskSetup.Filesystems = append(s.DiskSetup.Filesystems, upstreambootstrapv1.Filesystem{Device: "/dev/sdc", Filesystem: "xfs", Label: "data", Partition: "auto", Overwrite: ptr.To(true)})
			// A partition number would be what most users write, but Debian
			// bookworm's cloud-init schema only admits the keywords there,
			// although the module itself takes numbers.
		}
	}},
	{Name: "mounts", Formats: []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition}, Apply: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Mounts = []upstreambootstrapv1.MountPoints{{"LABEL=etcd_disk", "/var/lib/etcddisk"}, {"/dev/sdd1", "/var/lib/containerd", "xfs", "defaults,noatime"}}
	}},
	{Name: "commands", Formats: []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition}, Apply: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.PreKubeadmCommands = []string{"swapoff -a", "echo 'pre with \"quotes\"' > /tmp/pre"}
		s.PostKubeadmCommands = []string{"echo done > /tmp/post"}
		if s.Format == bootstrapv1.CloudConfig {
			s.BootCommands = []string{"cloud-init-per once mkdir-data mkdir -p /data"}
		}
		s.Verbosity = ptr.To[int32](5)
	}},
	{Name: "butane", Formats: []bootstrapv1.Format{bootstrapv1.Ignition}, Apply: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Ignition.Butane = bootstrapv1.ButaneConfig{Strict: ptr.To(true), AdditionalConfig: `variant: flatcar
version: 1.1.0
storage:
  files:
  - path: /etc/flatcar/update.conf
    mode: 0644
    overwrite: true
    contents:
      inline: |
        REBOOT_STRATEGY=off
systemd:
  units:
  - name: locksmithd.service
    mask: true
`}
	}},
	{Name: "container-linux-config", Formats: []bootstrapv1.Format{bootstrapv1.Ignition}, Apply: func(s *bootstrapv1.KubeadmConfigSpec) {
		if s.Ignition.Butane.IsDefined() {
			return // mutually exclusive with butane
		}
		s.Ignition.ContainerLinuxConfig = upstreambootstrapv1.ContainerLinuxConfig{Strict: ptr.To(true), AdditionalConfig: `storage:
  files:
  - path: /etc/clc-extra.conf
    filesystem: root
    mode: 0644
    contents:
      inline: from a container linux config
systemd:
  units:
  - name: clc-extra.service
    enabled: true
    contents: |
      [Unit]
      Description=extra
      [Service]
      Type=oneshot
      ExecStart=/usr/bin/true
      [Install]
      WantedBy=multi-user.target
`}
	}},
	{Name: "file-discovery", Formats: allFormats, Supports: func(a plan.Action) bool { return a != plan.ActionInit }, Apply: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.JoinConfiguration.Discovery.File = upstreambootstrapv1.FileDiscovery{
			KubeConfigPath: DiscoveryKubeconfigPath,
			KubeConfig: upstreambootstrapv1.FileDiscoveryKubeConfig{User: upstreambootstrapv1.KubeConfigUser{
				Exec: upstreambootstrapv1.KubeConfigAuthExec{Command: "/usr/local/bin/token-helper", Args: []string{"--cluster", "demo"}},
			}},
		}
		s.JoinConfiguration.Discovery.TLSBootstrapToken = Token
	}},
}

// Applies reports whether the feature applies to format and action.
func (f Feature) Applies(format bootstrapv1.Format, action plan.Action) bool {
	for _, ff := range f.Formats {
		if ff == format {
			return f.Supports == nil || f.Supports(action)
		}
	}
	return false
}

// Full returns a spec with every feature that applies to format and action.
func Full(format bootstrapv1.Format, action plan.Action) *bootstrapv1.KubeadmConfigSpec {
	s := Base(format, action)
	for _, f := range Features {
		if f.Applies(format, action) && f.Name != "file-discovery" {
			f.Apply(s)
		}
	}
	return s
}

// Random returns a spec for format and action drawn from r: a random subset
// of the applicable features with randomised values. The corpus tests run
// the real validators over many of them.
func Random(r *rand.Rand, format bootstrapv1.Format, action plan.Action) *bootstrapv1.KubeadmConfigSpec {
	s := Base(format, action)
	for _, f := range Features {
		if f.Applies(format, action) && r.IntN(2) == 0 {
			f.Apply(s)
		}
	}
	word := func() string {
		const letters = "abcdefghijklmnopqrstuvwxyz"
		b := make([]byte, 3+r.IntN(8))
		for i := range b {
			b[i] = letters[r.IntN(len(letters))]
		}
		return string(b)
	}
	// Randomise the kubeadm side for every format.
	switch action {
	case plan.ActionInit:
		s.ClusterConfiguration.APIServer.ExtraArgs = []upstreambootstrapv1.Arg{{Name: "audit-log-maxage", Value: ptr.To(fmt.Sprint(r.IntN(90) + 1))}}
		s.ClusterConfiguration.APIServer.CertSANs = append(s.ClusterConfiguration.APIServer.CertSANs, word()+".example.com")
		s.InitConfiguration.NodeRegistration.Name = word()
		if r.IntN(2) == 0 {
			s.ClusterConfiguration.Etcd.Local.DataDir = "/var/lib/" + word()
		}
	default:
		s.JoinConfiguration.NodeRegistration.Name = word()
		if r.IntN(2) == 0 {
			s.JoinConfiguration.NodeRegistration.KubeletExtraArgs = append(s.JoinConfiguration.NodeRegistration.KubeletExtraArgs,
				upstreambootstrapv1.Arg{Name: "max-pods", Value: ptr.To(fmt.Sprint(10 + r.IntN(200)))})
		}
	}
	if format == bootstrapv1.Raw {
		return s
	}
	for i := r.IntN(4); i > 0; i-- {
		s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/" + word() + "/" + word(), Content: word() + "\n" + word(), Permissions: []string{"0600", "0644", "0755"}[r.IntN(3)]})
	}
	for i := r.IntN(3); i > 0; i-- {
		s.PreKubeadmCommands = append(s.PreKubeadmCommands, "echo "+word())
	}
	if r.IntN(3) == 0 {
		s.Users = append(s.Users, upstreambootstrapv1.User{Name: word(), SSHAuthorizedKeys: []string{"ssh-ed25519 AAAA" + word()}})
	}
	return s
}
