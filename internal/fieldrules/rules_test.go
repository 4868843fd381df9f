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

package fieldrules

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

func gates(t testing.TB, ignition, raw bool) featuregate.FeatureGate {
	t.Helper()
	g := feature.NewFeatureGates()
	if err := g.SetFromMap(map[string]bool{string(feature.KubeadmBootstrapFormatIgnition): ignition, string(feature.KubeadmBootstrapFormatRaw): raw}); err != nil {
		t.Fatal(err)
	}
	return g
}

func joinSpec(format bootstrapv1.Format) *bootstrapv1.KubeadmConfigSpec {
	s := &bootstrapv1.KubeadmConfigSpec{Format: format}
	s.JoinConfiguration.NodeRegistration.Name = "node-a"
	return s
}

func paths(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

// example sets a rule's field to a value the formats that do not support it
// refuse, and says where validation reports that (relative to spec; atIn
// overrides it per format, where a restricted field reports the sub-field at
// fault or raw the whole field).
type example struct {
	set  func(*bootstrapv1.KubeadmConfigSpec)
	at   string
	atIn map[bootstrapv1.Format]string
}

func (e example) reportedAt(format bootstrapv1.Format) string {
	if p, ok := e.atIn[format]; ok {
		return p
	}
	return e.at
}

// gzippedPatch sets a kubeadm patch with a gzip encoding ("spec: {}").
func gzippedPatch(s *bootstrapv1.KubeadmConfigSpec) {
	s.InitConfiguration.Patches.Directory = "/etc/kubeadm/patches"
	s.Files = []upstreambootstrapv1.File{{Path: "/etc/kubeadm/patches/etcd.yaml", Content: "H4sIAAAAAAAC/ysuSE22Uqiu5QIAlQLavQkAAAA=", Encoding: upstreambootstrapv1.GzipBase64}}
}

func mbrPartition(s *bootstrapv1.KubeadmConfigSpec) {
	s.DiskSetup = upstreambootstrapv1.DiskSetup{Partitions: []upstreambootstrapv1.Partition{{Device: "/dev/sdb", Layout: ptr.To(true), TableType: "mbr"}}}
}

func inactiveUser(s *bootstrapv1.KubeadmConfigSpec) {
	s.Users = []upstreambootstrapv1.User{{Name: "ops", Inactive: ptr.To(true)}}
}

// examples prove each verdict of the table, by field.
var examples = map[string]example{
	// Both restrict the encoding of a kubeadm patch; which paths raw takes
	// is proven by TestRawTakesOnlyKubeadmPatches.
	"files":            {set: gzippedPatch, at: "files[0].encoding"},
	"files[].encoding": {set: gzippedPatch, at: "files[0].encoding"},
	"diskSetup": {set: mbrPartition, at: "diskSetup",
		atIn: map[bootstrapv1.Format]string{bootstrapv1.Ignition: "diskSetup.partitions[0].tableType"}},
	"diskSetup.partitions[].tableType": {set: mbrPartition, at: "diskSetup.partitions[0].tableType",
		atIn: map[bootstrapv1.Format]string{bootstrapv1.Raw: "diskSetup"}},
	"diskSetup.partitions[].diskLayout": {set: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.DiskSetup = upstreambootstrapv1.DiskSetup{Partitions: []upstreambootstrapv1.Partition{{Device: "/dev/sdb", DiskLayout: []upstreambootstrapv1.PartitionSpec{{Percentage: 50}}}}}
	}, at: "diskSetup.partitions[0].diskLayout", atIn: map[bootstrapv1.Format]string{bootstrapv1.Raw: "diskSetup"}},
	"diskSetup.filesystems[].partition": {set: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.DiskSetup = upstreambootstrapv1.DiskSetup{Filesystems: []upstreambootstrapv1.Filesystem{{Device: "/dev/sdb", Filesystem: "ext4", Partition: "auto"}}}
	}, at: "diskSetup.filesystems[0].partition", atIn: map[bootstrapv1.Format]string{bootstrapv1.Raw: "diskSetup"}},
	"diskSetup.filesystems[].replaceFS": {set: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.DiskSetup = upstreambootstrapv1.DiskSetup{Filesystems: []upstreambootstrapv1.Filesystem{{Device: "/dev/sdb", Filesystem: "ntfs", ReplaceFS: "ntfs"}}}
	}, at: "diskSetup.filesystems[0].replaceFS", atIn: map[bootstrapv1.Format]string{bootstrapv1.Raw: "diskSetup"}},
	"mounts": {set: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Mounts = []upstreambootstrapv1.MountPoints{{"LABEL=data", "/data"}}
	}, at: "mounts"},
	"bootCommands":        {set: func(s *bootstrapv1.KubeadmConfigSpec) { s.BootCommands = []string{"echo boot"} }, at: "bootCommands"},
	"preKubeadmCommands":  {set: func(s *bootstrapv1.KubeadmConfigSpec) { s.PreKubeadmCommands = []string{"echo pre"} }, at: "preKubeadmCommands"},
	"postKubeadmCommands": {set: func(s *bootstrapv1.KubeadmConfigSpec) { s.PostKubeadmCommands = []string{"echo post"} }, at: "postKubeadmCommands"},
	"users": {set: inactiveUser, at: "users",
		atIn: map[bootstrapv1.Format]string{bootstrapv1.Ignition: "users[0].inactive"}},
	"users[].inactive": {set: inactiveUser, at: "users[0].inactive",
		atIn: map[bootstrapv1.Format]string{bootstrapv1.Raw: "users"}},
	"ntp": {set: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.NTP = upstreambootstrapv1.NTP{Servers: []string{"time.example.com"}}
	}, at: "ntp"},
	"verbosity":    {set: func(s *bootstrapv1.KubeadmConfigSpec) { s.Verbosity = ptr.To[int32](5) }, at: "verbosity"},
	"gzipUserData": {set: func(s *bootstrapv1.KubeadmConfigSpec) { s.GzipUserData = ptr.To(true) }, at: "gzipUserData"},
	"ignition": {set: func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Ignition = bootstrapv1.IgnitionSpec{Butane: bootstrapv1.ButaneConfig{AdditionalConfig: "storage: {}\n"}}
	}, at: "format", atIn: map[bootstrapv1.Format]string{bootstrapv1.Raw: "ignition"}},
}

// topLevel is the spec field a path starts with (files for files[].encoding).
func topLevel(path string) string {
	return strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' })[0]
}

// TestEveryFieldAndFormat checks the verdict and the reported field path of
// every (format, field) pair in the table against the validation result.
func TestEveryFieldAndFormat(t *testing.T) {
	all := gates(t, true, true)
	for _, r := range Rules {
		ex, ok := examples[r.Field]
		if !ok {
			// kubeadm configuration: supported everywhere.
			for _, f := range bootstrapv1.Formats {
				if v := r.Treatment(f).Verdict; v != Supported {
					t.Errorf("%s in %s: verdict %s without an example to prove it", r.Field, f, v)
				}
			}
			continue
		}
		for _, format := range bootstrapv1.Formats {
			t.Run(r.Field+"/"+string(format), func(t *testing.T) {
				spec := joinSpec(format)
				ex.set(spec)
				errs := Validate(spec, all, field.NewPath("spec"))
				treatment := r.Treatment(format)

				want := "spec." + ex.reportedAt(format)
				if format == bootstrapv1.Raw && ruleOf(topLevel(r.Field)).Treatment(format).Verdict == Rejected && want != "spec."+topLevel(r.Field) {
					t.Fatalf("raw rejects this whole top-level field, but the table reports at %s", want)
				}
				switch treatment.Verdict {
				case Supported:
					if len(errs) != 0 {
						t.Fatalf("supported, but got %v", errs.ToAggregate())
					}
				default:
					if len(errs) != 1 || errs[0].Field != want {
						t.Fatalf("%s: want exactly one error at %s, got %v", treatment.Verdict, want, paths(errs))
					}
					if format == bootstrapv1.Raw && want != "spec.format" && !strings.Contains(errs[0].Detail, "the raw format carries kubeadm configuration only") {
						t.Errorf("raw message does not say why: %s", errs[0].Detail)
					}
				}
			})
		}
	}
}

func TestRawReportsEveryFieldAtOnce(t *testing.T) {
	spec := joinSpec(bootstrapv1.Raw)
	for _, r := range Rules {
		if ex, ok := examples[r.Field]; ok && r.Treatment(bootstrapv1.Raw).Verdict == Rejected && !strings.Contains(r.Field, "[]") {
			ex.set(spec)
		}
	}
	errs := Validate(spec, gates(t, true, true), field.NewPath("spec"))
	want := []string{"spec.diskSetup", "spec.mounts", "spec.bootCommands", "spec.preKubeadmCommands", "spec.postKubeadmCommands", "spec.users", "spec.ntp", "spec.verbosity", "spec.gzipUserData", "spec.ignition"}
	got := strings.Join(paths(errs), ",")
	for _, p := range want {
		if !strings.Contains(got+",", p+",") {
			t.Errorf("missing %s in %s", p, got)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("want %d errors, got %d: %v", len(want), len(errs), got)
	}
}

func ruleOf(name string) Rule {
	for _, r := range Rules {
		if r.Field == name {
			return r
		}
	}
	return Rule{}
}

// The raw format carries a spec's files only when they are kubeadm's
// patches: directly in a patches directory, whole, as text.
func TestRawTakesOnlyKubeadmPatches(t *testing.T) {
	all := gates(t, true, true)
	for _, tc := range []struct {
		name  string
		spec  func(*bootstrapv1.KubeadmConfigSpec)
		wants []string
	}{
		{"a patch for join", func(s *bootstrapv1.KubeadmConfigSpec) {
			s.JoinConfiguration.Patches.Directory = "/etc/kubeadm/patches"
			s.Files = []upstreambootstrapv1.File{{Path: "/etc/kubeadm/patches/kubeletconfiguration+merge.yaml", Content: "cgroupDriver: cgroupfs\n"}}
		}, nil},
		{"a patch for init, in a template that also joins", func(s *bootstrapv1.KubeadmConfigSpec) {
			s.InitConfiguration.Patches.Directory = "/etc/kubeadm/init-patches"
			s.Files = []upstreambootstrapv1.File{{Path: "/etc/kubeadm/init-patches/etcd.yaml", Content: "spec: {}\n"}}
		}, nil},
		{"no patches directory", func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Files = []upstreambootstrapv1.File{{Path: "/etc/kubeadm/patches/etcd.yaml", Content: "spec: {}\n"}}
		}, []string{"spec.files[0].path"}},
		{"beside the patches", func(s *bootstrapv1.KubeadmConfigSpec) {
			s.JoinConfiguration.Patches.Directory = "/etc/kubeadm/patches"
			s.Files = []upstreambootstrapv1.File{
				{Path: "/etc/kubeadm/patches/etcd.yaml", Content: "spec: {}\n"},
				{Path: "/etc/kubeadm/patches/sub/etcd.yaml", Content: "spec: {}\n"},
				{Path: "/etc/motd", Content: "hi\n"},
			}
		}, []string{"spec.files[1].path", "spec.files[2].path"}},
		{"appended or encoded", func(s *bootstrapv1.KubeadmConfigSpec) {
			s.JoinConfiguration.Patches.Directory = "/etc/kubeadm/patches"
			s.Files = []upstreambootstrapv1.File{
				{Path: "/etc/kubeadm/patches/etcd.yaml", Content: "spec: {}\n", Append: ptr.To(true)},
				{Path: "/etc/kubeadm/patches/kube-apiserver.yaml", Content: "c3BlYzoge30K", Encoding: upstreambootstrapv1.Base64},
			}
		}, []string{"spec.files[0].append", "spec.files[1].encoding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := joinSpec(bootstrapv1.Raw)
			tc.spec(spec)
			errs := Validate(spec, all, field.NewPath("spec"))
			if got, want := strings.Join(paths(errs), ","), strings.Join(tc.wants, ","); got != want {
				t.Fatalf("errors at %q, want %q: %v", got, want, errs.ToAggregate())
			}
			for _, e := range errs {
				if !strings.Contains(e.Detail, "the raw format carries kubeadm configuration only") {
					t.Errorf("%s: the message does not say why: %s", e.Field, e.Detail)
				}
			}
		})
	}
}

func TestGatedFormatsNameTheGateAndVariable(t *testing.T) {
	for format, words := range map[bootstrapv1.Format][]string{
		bootstrapv1.Ignition: {"KubeadmBootstrapFormatIgnition", "EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION"},
		bootstrapv1.Raw:      {"KubeadmBootstrapFormatRaw", "EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW"},
	} {
		errs := Validate(joinSpec(format), gates(t, false, false), field.NewPath("spec", "template", "spec"))
		if len(errs) != 1 || errs[0].Field != "spec.template.spec.format" || errs[0].Type != field.ErrorTypeForbidden {
			t.Fatalf("%s: %v", format, errs)
		}
		for _, w := range words {
			if !strings.Contains(errs[0].Detail, w) {
				t.Errorf("%s: message lacks %s: %s", format, w, errs[0].Detail)
			}
		}
		// The other gate does not enable this format.
		other := gates(t, format == bootstrapv1.Raw, format == bootstrapv1.Ignition)
		if len(Validate(joinSpec(format), other, field.NewPath("spec"))) != 1 {
			t.Errorf("%s enabled by the wrong gate", format)
		}
		if errs := Validate(joinSpec(format), gates(t, true, true), field.NewPath("spec")); len(errs) != 0 {
			t.Errorf("%s with its gate on: %v", format, errs)
		}
	}
}

func TestIgnitionExtras(t *testing.T) {
	on := gates(t, true, true)
	spec := joinSpec(bootstrapv1.Ignition)
	spec.Ignition.Butane.AdditionalConfig = "storage: {}\n"
	spec.Ignition.ContainerLinuxConfig.AdditionalConfig = "storage: {}\n"
	if errs := Validate(spec, on, field.NewPath("spec")); len(errs) != 1 || errs[0].Field != "spec.ignition.butane" || !strings.Contains(errs[0].Detail, "mutually exclusive") {
		t.Errorf("both extras: %v", errs)
	}

	spec = joinSpec(bootstrapv1.Ignition)
	spec.Ignition.Butane = bootstrapv1.ButaneConfig{AdditionalConfig: "storage:\n  filez: []\n", Strict: ptr.To(true)}
	errs := Validate(spec, on, field.NewPath("spec"))
	if len(errs) != 1 || errs[0].Field != "spec.ignition.butane.additionalConfig" || !strings.Contains(errs[0].Detail, "filez") {
		t.Errorf("butane warning under strict must be rejected with Butane's message: %v", errs)
	}
	spec.Ignition.Butane.Strict = ptr.To(false)
	if errs := Validate(spec, on, field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("butane warnings without strict must pass: %v", errs)
	}

	spec = joinSpec(bootstrapv1.Ignition)
	spec.Ignition.ContainerLinuxConfig.AdditionalConfig = "storage: ["
	if errs := Validate(spec, on, field.NewPath("spec")); len(errs) != 1 || errs[0].Field != "spec.ignition.containerLinuxConfig.additionalConfig" {
		t.Errorf("broken CLC: %v", errs)
	}
}

// Upstream's common rules hold for every format, and their errors carry no
// file contents or password hashes.
func TestCommonRulesForEveryFormatWithoutSecrets(t *testing.T) {
	for _, format := range []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition} {
		spec := joinSpec(format)
		spec.Files = []upstreambootstrapv1.File{
			{Path: "/etc/key", Content: "SECRET-KEY-MATERIAL", ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "s", Key: "k"}}},
			{Path: "/etc/key", Content: "x"},
		}
		spec.Users = []upstreambootstrapv1.User{{Name: "u", Passwd: "$6$SECRET-HASH", PasswdFrom: upstreambootstrapv1.PasswdSource{Secret: upstreambootstrapv1.SecretPasswdSource{Name: "s", Key: "k"}}}}
		errs := Validate(spec, gates(t, true, true), field.NewPath("spec"))
		got := strings.Join(paths(errs), ",")
		for _, p := range []string{"spec.files[0]", "spec.files[1].path", "spec.users[0]"} {
			if !strings.Contains(got, p) {
				t.Errorf("%s: missing %s in %s", format, p, got)
			}
		}
		if msg := errs.ToAggregate().Error(); strings.Contains(msg, "SECRET") {
			t.Errorf("%s: error leaks secret material: %s", format, msg)
		}
	}
	spec := joinSpec(bootstrapv1.Raw)
	spec.DiskSetup.Partitions = []upstreambootstrapv1.Partition{{Device: "/dev/sdb", DiskLayout: []upstreambootstrapv1.PartitionSpec{{Percentage: 80}, {Percentage: 30}}}}
	if errs := Validate(spec, gates(t, true, true), field.NewPath("spec")); !strings.Contains(strings.Join(paths(errs), ","), "spec.diskSetup.partitions[0].diskLayout") {
		t.Errorf("upstream's disk layout sum rule must hold for raw too: %v", errs)
	}
}

// A user file where the discovery kubeconfig is written is refused in every
// format that carries files, naming both fields; another path is fine.
func TestUserFileAtTheDiscoveryKubeconfigPath(t *testing.T) {
	for _, format := range []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition} {
		for _, tc := range []struct {
			file   string
			refuse bool
		}{{"/etc/kubernetes/discovery.conf", true}, {"/etc/kubernetes//discovery.conf", true}, {"/etc/kubernetes/other.conf", false}} {
			spec := joinSpec(format)
			spec.JoinConfiguration.Discovery = upstreambootstrapv1.Discovery{File: upstreambootstrapv1.FileDiscovery{
				KubeConfigPath: "/etc/kubernetes/discovery.conf",
				KubeConfig:     upstreambootstrapv1.FileDiscoveryKubeConfig{Cluster: upstreambootstrapv1.KubeConfigCluster{Server: "https://10.0.0.1:6443"}},
			}}
			spec.Files = []upstreambootstrapv1.File{{Path: tc.file, Content: "user's"}}
			errs := Validate(spec, gates(t, true, true), field.NewPath("spec"))
			msg := ""
			if agg := errs.ToAggregate(); agg != nil {
				msg = agg.Error()
			}
			refused := strings.Contains(msg, "spec.files[0].path") && strings.Contains(msg, "discovery.file.kubeConfigPath")
			if refused != tc.refuse {
				t.Errorf("%s, file %s: refused %v, want %v: %s", format, tc.file, refused, tc.refuse, msg)
			}
		}
	}
}

// Extra Ignition configuration may extend the bootstrap but not replace,
// disable or remove what it needs; each conflict names the field and the path.
func TestExtraIgnitionCannotUndoTheBootstrap(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string // want "" = admitted
	}{
		{"script", "storage:\n  files:\n  - path: /etc/kubeadm.sh\n    contents:\n      inline: echo\n", "writes /etc/kubeadm.sh"},
		{"config", "storage:\n  files:\n  - path: /etc/kubeadm.yml\n    contents:\n      inline: x\n", "writes /etc/kubeadm.yml"},
		{"ca", "storage:\n  links:\n  - path: /etc/kubernetes/pki/ca.crt\n    target: /tmp/x\n", "replaces /etc/kubernetes/pki/ca.crt"},
		{"sentinel dir", "storage:\n  directories:\n  - path: /run/cluster-api\n", "is /run/cluster-api"},
		{"unit replaced", "systemd:\n  units:\n  - name: kubeadm.service\n    contents: \"[Service]\\nExecStart=/bin/true\\n\"\n", "replaces kubeadm.service"},
		{"unit disabled", "systemd:\n  units:\n  - name: kubeadm.service\n    enabled: false\n", "disables kubeadm.service"},
		{"unit masked", "systemd:\n  units:\n  - name: kubeadm.service\n    mask: true\n", "masks kubeadm.service"},
		{"drop-in", "systemd:\n  units:\n  - name: kubeadm.service\n    dropins:\n    - name: 10-env.conf\n      contents: \"[Service]\\nEnvironment=A=b\\n\"\n", ""},
		{"other file", "storage:\n  files:\n  - path: /etc/kubernetes/extra.conf\n    contents:\n      inline: x\n", ""},
	} {
		spec := joinSpec(bootstrapv1.Ignition)
		spec.Ignition.Butane = bootstrapv1.ButaneConfig{AdditionalConfig: tc.doc}
		errs := Validate(spec, gates(t, true, true), field.NewPath("spec"))
		msg := ""
		if agg := errs.ToAggregate(); agg != nil {
			msg = agg.Error()
		}
		if tc.want == "" {
			if msg != "" {
				t.Errorf("%s: refused: %s", tc.name, msg)
			}
			continue
		}
		if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "spec.ignition.butane.additionalConfig") {
			t.Errorf("%s: %q, want a refusal naming spec.ignition.butane.additionalConfig and %q", tc.name, msg, tc.want)
		}
	}
	// The same guard holds for Container Linux Configs.
	spec := joinSpec(bootstrapv1.Ignition)
	spec.Ignition.ContainerLinuxConfig = upstreambootstrapv1.ContainerLinuxConfig{AdditionalConfig: "systemd:\n  units:\n  - name: kubeadm.service\n    enable: false\n    mask: true\n"}
	if msg := Validate(spec, gates(t, true, true), field.NewPath("spec")).ToAggregate(); msg == nil || !strings.Contains(msg.Error(), "spec.ignition.containerLinuxConfig.additionalConfig") || !strings.Contains(msg.Error(), "kubeadm.service") {
		t.Errorf("CLC masking kubeadm.service: %v", msg)
	}
}

func TestPlaceholdersEachFormatCannotFillAreRefused(t *testing.T) {
	on := gates(t, true, true)
	for _, tc := range []struct {
		name  string
		set   func(*bootstrapv1.KubeadmConfigSpec)
		paths map[bootstrapv1.Format]string // "" means admitted
	}{
		{"supported spellings", func(s *bootstrapv1.KubeadmConfigSpec) {
			s.JoinConfiguration.NodeRegistration.Name = "{{ ds.meta_data['local_hostname'] }}"
			s.JoinConfiguration.NodeRegistration.KubeletExtraArgs = []upstreambootstrapv1.Arg{{Name: "provider-id", Value: ptr.To("x:///{{ v1.instance_id }}")}}
		}, nil},
		{"a Jinja method call in the node name", func(s *bootstrapv1.KubeadmConfigSpec) {
			s.JoinConfiguration.NodeRegistration.Name = `{{ ds.meta_data.local_hostname.split(".")[0] }}`
		}, map[bootstrapv1.Format]string{bootstrapv1.Ignition: "spec.joinConfiguration.nodeRegistration.name", bootstrapv1.Raw: "spec.joinConfiguration.nodeRegistration.name"}},
		{"unsupported metadata in a kubelet argument", func(s *bootstrapv1.KubeadmConfigSpec) {
			s.InitConfiguration.NodeRegistration.KubeletExtraArgs = []upstreambootstrapv1.Arg{{Name: "node-labels", Value: ptr.To("zone={{ ds.meta_data.zone }}")}}
		}, map[bootstrapv1.Format]string{bootstrapv1.Ignition: "spec.initConfiguration.nodeRegistration.kubeletExtraArgs[0].value", bootstrapv1.Raw: "spec.initConfiguration.nodeRegistration.kubeletExtraArgs[0].value"}},
		{"instance data in a file (ignition writes it verbatim)", func(s *bootstrapv1.KubeadmConfigSpec) {
			if s.Format != bootstrapv1.Raw {
				s.Files = []upstreambootstrapv1.File{{Path: "/etc/x", Content: "host={{ v1.local_hostname }}"}}
			}
		}, map[bootstrapv1.Format]string{bootstrapv1.Ignition: "spec.files[0].content"}},
		{"a Go template in a file is not cloud-init's", func(s *bootstrapv1.KubeadmConfigSpec) {
			if s.Format != bootstrapv1.Raw {
				s.Files = []upstreambootstrapv1.File{{Path: "/etc/x", Content: "image: {{ .Values.image }}"}}
			}
		}, nil},
	} {
		for _, format := range bootstrapv1.Formats {
			spec := joinSpec(format)
			tc.set(spec)
			errs := Validate(spec, on, field.NewPath("spec"))
			want := tc.paths[format]
			switch {
			case want == "" && len(errs) != 0:
				t.Errorf("%s, %s: refused: %v", tc.name, format, errs.ToAggregate())
			case want != "" && (len(errs) != 1 || errs[0].Field != want):
				t.Errorf("%s, %s: want one error at %s, got %v", tc.name, format, want, errs.ToAggregate())
			case want != "" && !strings.Contains(errs[0].Detail, "{{ ds.meta_data.local_hostname }}") && !strings.Contains(errs[0].Detail, "verbatim"):
				t.Errorf("%s, %s: the message does not say what is supported: %s", tc.name, format, errs[0].Detail)
			}
		}
	}
}
