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

package plan

import (
	"fmt"
	"slices"

	"github.com/blang/semver/v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types/upstream"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/supportedversions"
)

// Cluster is what the Cluster and the owning Machine contribute.
type Cluster struct {
	// Name is the Cluster's name (kubeadm's clusterName).
	Name string
	// ControlPlaneEndpoint is host:port of the control plane, used when the
	// spec does not set one.
	ControlPlaneEndpoint string
	// KubernetesVersion is the machine's Kubernetes version; it selects the
	// kubeadm API version and becomes kubernetesVersion in ClusterConfiguration.
	KubernetesVersion string
	// ControlPlaneVersion is offered to spec.files templates as .controlPlane.version.
	ControlPlaneVersion string
	// ServiceDomain, ServiceSubnet and PodSubnet come from the Cluster's clusterNetwork.
	ServiceDomain string
	ServiceSubnet string
	PodSubnet     string
}

// VersionError is a Kubernetes version the plan cannot use: missing, not a
// version, or outside what kubeadm's configuration API versions cover.
type VersionError struct {
	// Of says whose version it is: the machine's or the control plane's.
	Of      string
	Version string
	Problem string
}

func (e *VersionError) Error() string {
	if e.Version == "" {
		return fmt.Sprintf("%s has no Kubernetes version", e.Of)
	}
	return fmt.Sprintf("Kubernetes version %q of %s: %s", e.Version, e.Of, e.Problem)
}

// SecretRef names a key of a Secret in the KubeadmConfig's namespace.
type SecretRef struct {
	Name string
	Key  string
}

// Input is everything a plan is computed from.
type Input struct {
	Spec    *bootstrapv1.KubeadmConfigSpec
	Action  Action
	Cluster Cluster
	// Certificates are the cluster's CAs and keys (Cluster API's util/secret).
	// init and join-control-plane need them with keys; a worker join needs at
	// least the cluster CA certificate to pin discovery (else discovery is
	// unpinned, as upstream does).
	Certificates secret.Certificates
	// BootstrapToken is used for token discovery when the spec has none.
	BootstrapToken string
	// ReadSecret resolves spec.files[].contentFrom and spec.users[].passwdFrom.
	ReadSecret func(SecretRef) ([]byte, error)
	// Joined asks for the plan of a machine that has joined already, as an
	// in-place update applies it: no discovery, no certificates, no token.
	Joined bool
}

var specPath = field.NewPath("spec")

// MachineVersion parses a machine's Kubernetes version and picks the kubeadm
// configuration API version for it; the error is a *VersionError.
func MachineVersion(v string) (semver.Version, schema.GroupVersion, error) {
	if v == "" {
		return semver.Version{}, schema.GroupVersion{}, &VersionError{Of: "the machine", Problem: "is required"}
	}
	version, err := semver.ParseTolerant(v)
	if err != nil {
		return semver.Version{}, schema.GroupVersion{}, &VersionError{Of: "the machine", Version: v, Problem: "is not a version"}
	}
	gv, err := kubeadmtypes.KubeVersionToKubeadmAPIGroupVersion(version)
	if err != nil {
		// Older than kubeadm's v1beta3 API. Say what does work: the range
		// the version matrix checks.
		return semver.Version{}, schema.GroupVersion{}, &VersionError{Of: "the machine", Version: v,
			Problem: "kubeadm has no configuration API this provider can write for it; it supports " + supportedversions.Range()}
	}
	return version, gv, nil
}

// Build computes the plan. Errors name the field they are about and never
// carry secret values.
func Build(in Input) (*Plan, error) {
	if in.Spec == nil {
		return nil, field.Required(specPath, "a KubeadmConfig spec is required")
	}
	spec := in.Spec.DeepCopy()
	format := spec.EffectiveFormat()
	if !slices.Contains(bootstrapv1.Formats, format) {
		return nil, field.NotSupported(specPath.Child("format"), spec.Format, formatStrings())
	}
	if !slices.Contains(Actions, in.Action) {
		return nil, fmt.Errorf("unknown action %q: must be one of init, join-control-plane, join", in.Action)
	}
	if in.Joined && in.Action == ActionInit {
		return nil, fmt.Errorf("a machine that has joined is planned as a join, not %q", in.Action)
	}
	// What the format cannot carry is refused here, for every renderer, by
	// the table admission applies: a renderer never drops a field.
	if errs := fieldrules.CheckFormatFields(spec, specPath); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	version, gv, err := MachineVersion(in.Cluster.KubernetesVersion)
	if err != nil {
		return nil, err
	}

	p := &Plan{
		Format:              format,
		Action:              in.Action,
		KubernetesVersion:   version,
		Kubeadm:             Kubeadm{APIVersion: gv.String(), Verbosity: spec.Verbosity},
		BootCommands:        spec.BootCommands,
		PreKubeadmCommands:  spec.PreKubeadmCommands,
		PostKubeadmCommands: spec.PostKubeadmCommands,
		Mounts:              spec.Mounts,
		Ignition:            spec.Ignition,
		Compress:            ptr.Deref(spec.GzipUserData, false),
	}
	if spec.NTP.IsDefined() {
		p.NTP = &spec.NTP
	}
	if spec.DiskSetup.IsDefined() {
		p.Partitions = spec.DiskSetup.Partitions
		p.Filesystems = spec.DiskSetup.Filesystems
	}

	switch in.Action {
	case ActionInit:
		err = p.planInit(spec, in, version)
	default:
		err = p.planJoin(spec, in, version)
	}
	if err != nil {
		return nil, err
	}

	// What the spec brings into the data is bounded for the whole spec,
	// not per file: see machinechecks.MaxContent and the template bounds.
	var budget machinechecks.Budget
	userFiles, err := resolveFiles(spec.Files, in, &budget)
	if err != nil {
		return nil, err
	}
	p.Files = append(p.Files, userFiles...)
	if p.Users, err = resolveUsers(spec.Users, in.ReadSecret, &budget); err != nil {
		return nil, err
	}
	return p, nil
}

func formatStrings() []string {
	out := make([]string, 0, len(bootstrapv1.Formats))
	for _, f := range bootstrapv1.Formats {
		out = append(out, string(f))
	}
	return out
}

func (p *Plan) planInit(spec *bootstrapv1.KubeadmConfigSpec, in Input, version semver.Version) error {
	cc := spec.ClusterConfiguration
	if cc.ControlPlaneEndpoint == "" {
		cc.ControlPlaneEndpoint = in.Cluster.ControlPlaneEndpoint
	}
	data := &upstream.AdditionalData{KubernetesVersion: ptr.To(in.Cluster.KubernetesVersion)}
	if in.Cluster.Name != "" {
		data.ClusterName = ptr.To(in.Cluster.Name)
	}
	if in.Cluster.ServiceDomain != "" {
		data.DNSDomain = ptr.To(in.Cluster.ServiceDomain)
	}
	if in.Cluster.ServiceSubnet != "" {
		data.ServiceSubnet = ptr.To(in.Cluster.ServiceSubnet)
	}
	if in.Cluster.PodSubnet != "" {
		data.PodSubnet = ptr.To(in.Cluster.PodSubnet)
	}
	data.ControlPlaneComponentHealthCheckSeconds = spec.InitConfiguration.Timeouts.ControlPlaneComponentHealthCheckSeconds

	clusterDoc, err := kubeadmtypes.MarshalClusterConfigurationForVersion(&cc, version, data)
	if err != nil {
		return fmt.Errorf("%s: %w", specPath.Child("clusterConfiguration"), err)
	}
	initDoc, err := kubeadmtypes.MarshalInitConfigurationForVersion(&spec.InitConfiguration, version)
	if err != nil {
		return fmt.Errorf("%s: %w", specPath.Child("initConfiguration"), err)
	}
	p.Kubeadm.Documents = []string{clusterDoc, initDoc}
	p.Kubeadm.PatchesDirectory = spec.InitConfiguration.Patches.Directory
	p.Kubeadm.KubeletExtraArgs = spec.InitConfiguration.NodeRegistration.KubeletExtraArgs
	return p.addControlPlaneCertificates(in.Certificates)
}

func (p *Plan) addControlPlaneCertificates(certs secret.Certificates) error {
	ca := certs.GetByPurpose(secret.ClusterCA)
	if ca == nil || ca.KeyPair == nil || len(ca.KeyPair.Cert) == 0 || len(ca.KeyPair.Key) == 0 {
		return fmt.Errorf("a control-plane machine needs the cluster CA certificate and key")
	}
	for _, purpose := range []secret.Purpose{secret.EtcdCA, secret.FrontProxyCA, secret.ServiceAccount} {
		c := certs.GetByPurpose(purpose)
		if c == nil || c.External {
			continue
		}
		if c.KeyPair == nil || len(c.KeyPair.Cert) == 0 || len(c.KeyPair.Key) == 0 {
			return fmt.Errorf("a control-plane machine needs the %s certificate and key", purpose)
		}
	}
	for i, f := range certs.AsFiles() {
		p.Files = append(p.Files, File{
			Kind: FileCertificate, Path: f.Path, Owner: f.Owner, Permissions: f.Permissions,
			Content: f.Content, Source: fmt.Sprintf("certificates[%d]", i),
		})
	}
	return nil
}

func (p *Plan) planJoin(spec *bootstrapv1.KubeadmConfigSpec, in Input, version semver.Version) error {
	jc := spec.JoinConfiguration.DeepCopy()
	jcPath := specPath.Child("joinConfiguration")
	switch {
	case in.Action == ActionJoin && jc.ControlPlane != nil:
		return field.Invalid(jcPath.Child("controlPlane"), "set", "a worker must not set joinConfiguration.controlPlane; use the join-control-plane action for control-plane machines")
	case in.Action == ActionJoinControlPlane && jc.ControlPlane == nil:
		jc.ControlPlane = &upstreambootstrapv1.JoinControlPlane{}
	}

	if in.Joined {
		jc.Discovery = upstreambootstrapv1.Discovery{}
	} else if err := p.planDiscovery(jc, in, jcPath.Child("discovery")); err != nil {
		return err
	}

	// Cluster API removes this taint once it has linked the Node to its Machine.
	taints := ptr.Deref(jc.NodeRegistration.Taints, []corev1.Taint{})
	if in.Action == ActionJoin && !slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.MatchTaint(&clusterv1.NodeUninitializedTaint) }) {
		jc.NodeRegistration.Taints = ptr.To(append(taints, clusterv1.NodeUninitializedTaint))
	}

	doc, err := kubeadmtypes.MarshalJoinConfigurationForVersion(jc, version)
	if err != nil {
		return fmt.Errorf("%s: %w", jcPath, err)
	}
	p.Kubeadm.Documents = []string{doc}
	p.Kubeadm.PatchesDirectory = jc.Patches.Directory
	p.Kubeadm.KubeletExtraArgs = jc.NodeRegistration.KubeletExtraArgs

	if in.Action == ActionJoinControlPlane && !in.Joined {
		return p.addControlPlaneCertificates(in.Certificates)
	}
	return nil
}

// planDiscovery fills in what kubeadm join needs to find and trust the
// cluster, the way upstream's controller does: endpoint and CA pins from the
// cluster, the bootstrap token from the caller.
func (p *Plan) planDiscovery(jc *upstreambootstrapv1.JoinConfiguration, in Input, path *field.Path) error {
	ca := in.Certificates.GetByPurpose(secret.ClusterCA)
	haveCA := ca != nil && ca.KeyPair != nil && len(ca.KeyPair.Cert) > 0

	if jc.Discovery.File.IsDefined() {
		kc := &jc.Discovery.File.KubeConfig
		if !kc.IsDefined() {
			return nil // a kubeconfig the machine already has
		}
		if jc.Discovery.File.KubeConfigPath == "" {
			return field.Required(path.Child("file", "kubeConfigPath"), "needed to write discovery.file.kubeConfig")
		}
		if kc.Cluster.Server == "" {
			if in.Cluster.ControlPlaneEndpoint == "" {
				return field.Required(path.Child("file", "kubeConfig", "cluster", "server"), "no server set and the cluster has no control-plane endpoint")
			}
			kc.Cluster.Server = "https://" + in.Cluster.ControlPlaneEndpoint
		}
		if len(kc.Cluster.CertificateAuthorityData) == 0 {
			if !haveCA {
				return field.Required(path.Child("file", "kubeConfig", "cluster", "certificateAuthorityData"), "no CA data set and no cluster CA available")
			}
			kc.Cluster.CertificateAuthorityData = ca.KeyPair.Cert
		}
		f, err := discoveryKubeconfig(jc.Discovery.File)
		if err != nil {
			return fmt.Errorf("%s: %w", path.Child("file", "kubeConfig"), err)
		}
		p.Files = append(p.Files, f)
		return nil
	}

	bt := &jc.Discovery.BootstrapToken
	if len(bt.CACertHashes) == 0 && haveCA {
		hashes, err := ca.Hashes()
		if err != nil {
			return fmt.Errorf("hashing the cluster CA for %s: %w", path.Child("bootstrapToken", "caCertHashes"), err)
		}
		bt.CACertHashes = hashes
	}
	if bt.APIServerEndpoint == "" {
		if in.Cluster.ControlPlaneEndpoint == "" {
			return field.Required(path.Child("bootstrapToken", "apiServerEndpoint"), "no endpoint set and the cluster has no control-plane endpoint")
		}
		bt.APIServerEndpoint = in.Cluster.ControlPlaneEndpoint
	}
	if bt.Token == "" {
		if in.BootstrapToken == "" {
			return field.Required(path.Child("bootstrapToken", "token"), "no bootstrap token set and none was provided")
		}
		bt.Token = in.BootstrapToken
	}
	if len(bt.CACertHashes) == 0 {
		bt.UnsafeSkipCAVerification = ptr.To(true)
	}
	return nil
}

func discoveryKubeconfig(d upstreambootstrapv1.FileDiscovery) (File, error) {
	kc := d.KubeConfig
	cluster := clientcmdv1.Cluster{
		Server:                   kc.Cluster.Server,
		TLSServerName:            kc.Cluster.TLSServerName,
		InsecureSkipTLSVerify:    ptr.Deref(kc.Cluster.InsecureSkipTLSVerify, false),
		CertificateAuthorityData: kc.Cluster.CertificateAuthorityData,
		ProxyURL:                 kc.Cluster.ProxyURL,
	}
	user := clientcmdv1.AuthInfo{}
	if kc.User.AuthProvider.IsDefined() {
		user.AuthProvider = &clientcmdv1.AuthProviderConfig{Name: kc.User.AuthProvider.Name, Config: kc.User.AuthProvider.Config}
	}
	if kc.User.Exec.IsDefined() {
		exec := &clientcmdv1.ExecConfig{
			Command:            kc.User.Exec.Command,
			Args:               kc.User.Exec.Args,
			APIVersion:         kc.User.Exec.APIVersion,
			ProvideClusterInfo: ptr.Deref(kc.User.Exec.ProvideClusterInfo, false),
			InteractiveMode:    clientcmdv1.NeverExecInteractiveMode,
		}
		if exec.APIVersion == "" {
			exec.APIVersion = "client.authentication.k8s.io/v1"
		}
		for _, e := range kc.User.Exec.Env {
			exec.Env = append(exec.Env, clientcmdv1.ExecEnvVar{Name: e.Name, Value: e.Value})
		}
		user.Exec = exec
	}
	cfg := clientcmdv1.Config{
		APIVersion:     "v1",
		Kind:           "Config",
		CurrentContext: "default",
		Clusters:       []clientcmdv1.NamedCluster{{Name: "default", Cluster: cluster}},
		AuthInfos:      []clientcmdv1.NamedAuthInfo{{Name: "default", AuthInfo: user}},
		Contexts:       []clientcmdv1.NamedContext{{Name: "default", Context: clientcmdv1.Context{Cluster: "default", AuthInfo: "default"}}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return File{}, err
	}
	return File{
		Kind: FileDiscoveryKubeconfig, Path: d.KubeConfigPath, Owner: "root:root", Permissions: "0640",
		Content: string(b), Source: "spec.joinConfiguration.discovery.file.kubeConfig",
	}, nil
}

// TemplatesFiles reports whether a spec's files are templates, which may
// use the control plane's version (Cluster.ControlPlaneVersion): the
// caller reads it only then.
func TemplatesFiles(spec *bootstrapv1.KubeadmConfigSpec) bool {
	return slices.ContainsFunc(spec.Files, func(f upstreambootstrapv1.File) bool {
		return f.ContentFormat == upstreambootstrapv1.FileContentFormatTemplate
	})
}

func resolveFiles(files []upstreambootstrapv1.File, in Input, budget *machinechecks.Budget) ([]File, error) {
	out := make([]File, 0, len(files))
	tmplData := map[string]any{}
	if v := in.Cluster.ControlPlaneVersion; v != "" {
		parsed, err := semver.ParseTolerant(v)
		if err != nil {
			return nil, &VersionError{Of: "the control plane", Version: v, Problem: "is not a version"}
		}
		tmplData["controlPlane"] = map[string]any{"version": "v" + parsed.String()}
	}
	templates := &templateBudget{}
	for i, f := range files {
		path := specPath.Child("files").Index(i)
		content, err := fileContent(f, path, in.ReadSecret)
		if err != nil {
			return nil, err
		}
		if f.ContentFormat == upstreambootstrapv1.FileContentFormatTemplate {
			rendered, err := renderTemplate(f.Path, content, tmplData, templates)
			if err != nil {
				return nil, &TemplateError{Field: path.String(), Path: f.Path, Problem: err.Error()}
			}
			content = rendered
		}
		if err := budget.Spend(path, len(content)); err != nil {
			return nil, err
		}
		// Decoded as the machine will, within what is left of the budget.
		if err := budget.Decodes(path, f.Encoding, content); err != nil {
			return nil, err
		}
		out = append(out, File{
			Kind: FileUser, Path: f.Path, Owner: f.Owner, Permissions: f.Permissions, Encoding: f.Encoding,
			Content: content, Append: ptr.Deref(f.Append, false), Source: path.String(),
		})
	}
	return out, nil
}

// fileContent is a file's content as given: inline, or read from its Secret.
func fileContent(f upstreambootstrapv1.File, path *field.Path, read func(SecretRef) ([]byte, error)) (string, error) {
	if !f.ContentFrom.IsDefined() {
		return f.Content, nil
	}
	ref := f.ContentFrom.Secret
	at := path.Child("contentFrom", "secret")
	if read == nil {
		return "", field.Invalid(at, ref.Name+"/"+ref.Key, "cannot resolve contentFrom: no secret source available")
	}
	data, err := read(SecretRef{Name: ref.Name, Key: ref.Key})
	if err != nil {
		return "", field.Invalid(at, ref.Name+"/"+ref.Key, fmt.Sprintf("cannot read the referenced secret key: %v", err))
	}
	return string(data), nil
}

func resolveUsers(users []upstreambootstrapv1.User, read func(SecretRef) ([]byte, error), budget *machinechecks.Budget) ([]User, error) {
	out := make([]User, 0, len(users))
	for i, u := range users {
		if u.PasswdFrom.IsDefined() {
			path := specPath.Child("users").Index(i).Child("passwdFrom", "secret")
			ref := u.PasswdFrom.Secret
			if read == nil {
				return nil, field.Invalid(path, ref.Name+"/"+ref.Key, "cannot resolve passwdFrom: no secret source available")
			}
			data, err := read(SecretRef{Name: ref.Name, Key: ref.Key})
			if err != nil {
				return nil, field.Invalid(path, ref.Name+"/"+ref.Key, fmt.Sprintf("cannot read the referenced secret key: %v", err))
			}
			if err := budget.Spend(path, len(data)); err != nil {
				return nil, err
			}
			u.Passwd = string(data)
			u.PasswdFrom = upstreambootstrapv1.PasswdSource{}
		}
		out = append(out, User{User: u})
	}
	return out, nil
}
