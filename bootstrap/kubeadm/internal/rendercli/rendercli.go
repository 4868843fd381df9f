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

// Package rendercli is the offline `render` command: it reads a KubeadmConfig
// (or KubeadmConfigTemplate) manifest and prints the bootstrap data a machine
// would receive, without a management cluster. What a cluster would provide
// (name, endpoint, version, certificates, bootstrap token) comes from flags, a
// small cluster file, or is generated for the occasion.
package rendercli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstrapdata"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlsize"
)

// ClusterFile is the optional --cluster file: what the Cluster and Machine would provide.
type ClusterFile struct {
	Name                 string `json:"name,omitempty"`
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint,omitempty"`
	KubernetesVersion    string `json:"kubernetesVersion,omitempty"`
	ControlPlaneVersion  string `json:"controlPlaneVersion,omitempty"`
	ServiceDomain        string `json:"serviceDomain,omitempty"`
	ServiceSubnet        string `json:"serviceSubnet,omitempty"`
	PodSubnet            string `json:"podSubnet,omitempty"`
}

type options struct {
	configFile      string
	clusterFile     string
	cluster         ClusterFile
	action          string
	certificatesDir string
	token           string
	secretsDir      string
	validate        bool
	key             string
	outputDir       string
	sizeReport      bool
}

// Run executes the command with args, writing bootstrap data to stdout and
// notes to stderr. It returns the process exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	if err := run(args, stdout, stderr); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "render: %v\n", err)
		return 1
	}
	return 0
}

func run(args []string, stdout, stderr io.Writer) error {
	var o options
	// The same gate definitions the manager uses, in a private instance.
	gates := feature.NewFeatureGates()
	fs := pflag.NewFlagSet("render", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: render --config FILE [flags]\n\nPrints the bootstrap data a machine would receive for a KubeadmConfig.\n\n%s", fs.FlagUsages())
	}
	fs.StringVarP(&o.configFile, "config", "f", "", "KubeadmConfig or KubeadmConfigTemplate manifest (YAML); - for stdin")
	fs.StringVar(&o.clusterFile, "cluster", "", "YAML file with name, controlPlaneEndpoint, kubernetesVersion, controlPlaneVersion, serviceDomain, serviceSubnet, podSubnet")
	fs.StringVar(&o.cluster.Name, "cluster-name", "", "cluster name (default: the cluster.x-k8s.io/cluster-name label, else \"cluster\")")
	fs.StringVar(&o.cluster.ControlPlaneEndpoint, "control-plane-endpoint", "", "control-plane endpoint host:port")
	fs.StringVar(&o.cluster.KubernetesVersion, "kubernetes-version", "", "the machine's Kubernetes version, e.g. v1.36.3 (required)")
	fs.StringVar(&o.action, "action", "", "init, join-control-plane or join (default: derived from the spec)")
	fs.StringVar(&o.certificatesDir, "certificates-dir", "", "directory with the cluster CAs in kubeadm's layout (ca.crt/ca.key, etcd/ca.*, front-proxy-ca.*, sa.*); generated when unset")
	fs.StringVar(&o.token, "token", "", "bootstrap token for joins; generated when unset")
	fs.StringVar(&o.secretsDir, "secrets-dir", "", "directory resolving contentFrom/passwdFrom: <dir>/<secret name>/<key>")
	fs.BoolVar(&o.validate, "validate", false, "run the admission rules on the spec first (the same table the webhooks use)")
	fs.StringVar(&o.key, "key", bootstrapdata.ValueKey, "which data secret key to print (value, or files for raw control planes)")
	fs.StringVar(&o.outputDir, "output-dir", "", "write every data secret key to a file in this directory instead of printing one")
	fs.BoolVar(&o.sizeReport, "size-report", false, "print the data's size against common user-data limits (and with gzipUserData) instead of the data")
	gates.AddFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.configFile == "" {
		fs.Usage()
		return fmt.Errorf("--config is required")
	}

	in, err := readConfig(o.configFile)
	if err != nil {
		return err
	}
	// What renders is the spec with the format and Butane its annotations
	// choose, as in the manager.
	spec, errs := fieldrules.Resolve(in.annotations, in.spec, in.annotationsPath)
	if len(errs) > 0 {
		return fmt.Errorf("%s is invalid:\n%s", in.name, formatErrors(errs))
	}
	// A gated format is refused as at admission, with or without --validate.
	if msg := fieldrules.FormatDisabled(spec.EffectiveFormat(), gates); msg != "" {
		at := in.specPath.Child("format")
		if spec.EffectiveFormat() != in.spec.EffectiveFormat() {
			at = in.annotationsPath.Key(bootstrapv1.FormatAnnotation)
		}
		return fmt.Errorf("%s: %s: %s", in.name, at, msg)
	}
	if o.validate {
		_, errs, warnings := fieldrules.ValidateAnnotated(in.annotations, in.spec, gates, in.annotationsPath, in.specPath)
		// Admission's warnings, as kubectl prints them.
		for _, w := range warnings {
			fmt.Fprintf(stderr, "Warning: %s\n", w)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s is invalid:\n%s", in.name, formatErrors(errs))
		}
	}

	cluster, err := o.clusterInfo(in)
	if err != nil {
		return err
	}
	action, err := o.resolveAction(spec, in, stderr)
	if err != nil {
		return err
	}
	certificates, generated, err := o.certificates(spec, action)
	if err != nil {
		return err
	}
	token := o.token
	if token == "" {
		if token, err = bootstraputil.GenerateBootstrapToken(); err != nil {
			return err
		}
	}

	p, err := plan.Build(plan.Input{
		Spec: spec, Action: action, Cluster: cluster, Certificates: certificates,
		BootstrapToken: token, ReadSecret: o.readSecret,
	})
	if err != nil {
		return err
	}
	data, err := bootstrapdata.Render(p)
	if err != nil {
		return err
	}
	// What the controller would refuse (BootstrapDataTooLarge) is refused here too.
	if err := data.FitsSecret(); err != nil {
		return err
	}
	if generated {
		fmt.Fprintln(stderr, "render: generated throwaway cluster certificates (use --certificates-dir for your own)")
	}
	if o.sizeReport {
		return sizeReport(p, data, stdout)
	}
	return o.write(data, stdout, stderr)
}

// sizeReport prints data's size against the common limits, next to the size
// the same plan has compressed (for formats that can be).
func sizeReport(p *plan.Plan, data *bootstrapdata.Data, stdout io.Writer) error {
	var compressed *bootstrapdata.Data
	if !p.Compress && p.Format != bootstrapv1.Raw {
		c := *p
		c.Compress = true
		var err error
		if compressed, err = bootstrapdata.Render(&c); err != nil {
			return err
		}
	}
	return bootstrapdata.WriteSizeReport(stdout, data, compressed)
}

func (o *options) write(data *bootstrapdata.Data, stdout, stderr io.Writer) error {
	keys := data.SecretData()
	if o.outputDir != "" {
		if err := os.MkdirAll(o.outputDir, 0o700); err != nil {
			return err
		}
		names := make([]string, 0, len(keys))
		for k, v := range keys {
			if err := os.WriteFile(filepath.Join(o.outputDir, k), v, 0o600); err != nil {
				return err
			}
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Fprintf(stderr, "render: wrote %s to %s\n", strings.Join(names, ", "), o.outputDir)
		return nil
	}
	v, ok := keys[o.key]
	if !ok {
		return fmt.Errorf("the %s bootstrap data has no key %q", data.Format, o.key)
	}
	if _, err := stdout.Write(v); err != nil {
		return err
	}
	if o.key == bootstrapdata.ValueKey {
		for k := range data.Extra {
			fmt.Fprintf(stderr, "render: the bootstrap data also has key %q (print it with --key %s, or use --output-dir)\n", k, k)
		}
	}
	return nil
}

func formatErrors(errs field.ErrorList) string {
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		lines = append(lines, "  "+e.Error())
	}
	return strings.Join(lines, "\n")
}

// readConfig reads a KubeadmConfig or KubeadmConfigTemplate strictly, so a
// misspelt field is an error rather than silently ignored.
func readConfig(path string) (*input, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if err := yamlsize.Check(data, yamlsize.RenderInput); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if n, err := countDocuments(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	} else if n != 1 {
		return nil, fmt.Errorf("%s holds %d YAML documents: render takes exactly one KubeadmConfig or KubeadmConfigTemplate", path, n)
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if meta.APIVersion != bootstrapv1.GroupVersion.String() {
		return nil, fmt.Errorf("%s: apiVersion %q: want %s", path, meta.APIVersion, bootstrapv1.GroupVersion)
	}
	switch meta.Kind {
	case "KubeadmConfig":
		var c bootstrapv1.KubeadmConfig
		if err := decodeStrict(data, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &input{name: "KubeadmConfig " + c.Name, spec: &c.Spec, specPath: field.NewPath("spec"), clusterLabel: c.Labels[clusterv1.ClusterNameLabel],
			annotations: c.Annotations, annotationsPath: field.NewPath("metadata", "annotations")}, nil
	case "KubeadmConfigTemplate":
		var t bootstrapv1.KubeadmConfigTemplate
		if err := decodeStrict(data, &t); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &input{name: "KubeadmConfigTemplate " + t.Name, spec: &t.Spec.Template.Spec, specPath: field.NewPath("spec", "template", "spec"), clusterLabel: t.Labels[clusterv1.ClusterNameLabel],
			annotations: t.Spec.Template.ObjectMeta.Annotations, annotationsPath: field.NewPath("spec", "template", "metadata", "annotations")}, nil
	}
	return nil, fmt.Errorf("%s: kind %q: want KubeadmConfig or KubeadmConfigTemplate", path, meta.Kind)
}

// countDocuments counts the non-empty documents of a YAML stream.
func countDocuments(data []byte) (int, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	n := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		if len(bytes.TrimSpace(doc)) > 0 && !onlyComments(doc) {
			n++
		}
	}
}

func onlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

// decodeStrict decodes like the API server does with strict field
// validation: field names are case-sensitive and unknown fields are errors.
func decodeStrict(data []byte, into any) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(j, into)
	if err != nil {
		return err
	}
	if len(strictErrs) > 0 {
		return errors.Join(strictErrs...)
	}
	return nil
}

// input is the manifest read by readConfig.
type input struct {
	name         string
	spec         *bootstrapv1.KubeadmConfigSpec
	specPath     *field.Path
	clusterLabel string
	// annotations may choose the format and Butane (see fieldrules.Resolve).
	annotations     map[string]string
	annotationsPath *field.Path
}

func (o *options) clusterInfo(in *input) (plan.Cluster, error) {
	c := ClusterFile{}
	if o.clusterFile != "" {
		data, err := os.ReadFile(o.clusterFile)
		if err != nil {
			return plan.Cluster{}, err
		}
		if err := yamlsize.Check(data, yamlsize.RenderInput); err != nil {
			return plan.Cluster{}, fmt.Errorf("%s: %w", o.clusterFile, err)
		}
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			return plan.Cluster{}, fmt.Errorf("%s: %w", o.clusterFile, err)
		}
	}
	// Flags override the file.
	for _, kv := range []struct {
		dst *string
		src string
	}{
		{&c.Name, o.cluster.Name}, {&c.ControlPlaneEndpoint, o.cluster.ControlPlaneEndpoint},
		{&c.KubernetesVersion, o.cluster.KubernetesVersion},
	} {
		if kv.src != "" {
			*kv.dst = kv.src
		}
	}
	if c.Name == "" {
		c.Name = in.clusterLabel
	}
	if c.Name == "" {
		c.Name = "cluster"
	}
	if c.KubernetesVersion == "" {
		return plan.Cluster{}, fmt.Errorf("the machine's Kubernetes version is required: --kubernetes-version or kubernetesVersion in --cluster")
	}
	return plan.Cluster{
		Name: c.Name, ControlPlaneEndpoint: c.ControlPlaneEndpoint, KubernetesVersion: c.KubernetesVersion,
		ControlPlaneVersion: c.ControlPlaneVersion, ServiceDomain: c.ServiceDomain, ServiceSubnet: c.ServiceSubnet, PodSubnet: c.PodSubnet,
	}, nil
}

// resolveAction derives the action the way Cluster API's controllers decide
// it: a join configuration with controlPlane joins a control plane, any other
// join configuration joins a worker, otherwise the machine initialises. An
// --action the spec has no configuration for is refused rather than rendered
// from an empty one.
func (o *options) resolveAction(spec *bootstrapv1.KubeadmConfigSpec, in *input, stderr io.Writer) (plan.Action, error) {
	derived := plan.ActionInit
	switch {
	case spec.JoinConfiguration.ControlPlane != nil:
		derived = plan.ActionJoinControlPlane
	case spec.JoinConfiguration.IsDefined():
		derived = plan.ActionJoin
	}
	if o.action == "" {
		return derived, nil
	}
	var action plan.Action
	for _, a := range plan.Actions {
		if string(a) == o.action {
			action = a
		}
	}
	hasInit := spec.InitConfiguration.IsDefined() || spec.ClusterConfiguration.IsDefined()
	join := in.specPath.Child("joinConfiguration")
	switch {
	case action == "":
		return "", fmt.Errorf("--action %q: must be one of init, join-control-plane, join", o.action)
	case action == plan.ActionInit && !hasInit && spec.JoinConfiguration.IsDefined():
		return "", fmt.Errorf("--action init, but %s has only %s: it would initialise from an empty configuration", in.name, join)
	case action != plan.ActionInit && !spec.JoinConfiguration.IsDefined() && hasInit:
		return "", fmt.Errorf("--action %s, but %s has no %s: it would join with an empty configuration", action, in.name, join)
	case action == plan.ActionJoin && spec.JoinConfiguration.ControlPlane != nil:
		return "", fmt.Errorf("--action join, but %s sets %s: that is a control-plane join (--action join-control-plane)", in.name, join.Child("controlPlane"))
	case action != derived:
		fmt.Fprintf(stderr, "render: --action %s overrides %s, which the spec alone suggests\n", action, derived)
	}
	return action, nil
}

func (o *options) certificates(spec *bootstrapv1.KubeadmConfigSpec, action plan.Action) (secret.Certificates, bool, error) {
	c := plan.CertificatesFor(action, spec)
	if o.certificatesDir == "" {
		return c, true, c.Generate()
	}
	// Read from kubeadm's layout under --certificates-dir, whatever paths the
	// spec will write them to on the machine.
	err := plan.LoadCertificates(c, action, func(rel string) ([]byte, error) {
		return os.ReadFile(filepath.Join(o.certificatesDir, rel))
	})
	return c, false, err
}

func (o *options) readSecret(ref plan.SecretRef) ([]byte, error) {
	if o.secretsDir == "" {
		return nil, fmt.Errorf("secret %s is referenced: pass --secrets-dir", ref.Name)
	}
	if strings.ContainsAny(ref.Name, "/\\") || strings.ContainsAny(ref.Key, "/\\") || ref.Name == ".." || ref.Key == ".." {
		return nil, fmt.Errorf("invalid secret reference")
	}
	return os.ReadFile(filepath.Join(o.secretsDir, ref.Name, ref.Key))
}
