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

package ignition

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vincent-petithory/dataurl"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

// placeholderPlan has a placeholder in each spelling class: one the YAML
// emitter quotes (its quotes doubled), one inside a longer value, a bare one.
func placeholderPlan(t *testing.T) *plan.Plan {
	t.Helper()
	spec := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
	nr := &spec.JoinConfiguration.NodeRegistration
	nr.Name = "{{ ds.meta_data['local_hostname'] }}"
	nr.KubeletExtraArgs = append(nr.KubeletExtraArgs,
		upstreambootstrapv1.Arg{Name: "provider-id", Value: ptr.To("openstack:///{{ v1.instance_id }}")},
		upstreambootstrapv1.Arg{Name: "node-ip", Value: ptr.To("{{ds.meta_data.local_ipv4}}")})
	p, err := plan.Build(plantest.Input(spec, plan.ActionJoin))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func renderedFile(t *testing.T, p *plan.Plan, path string) string {
	t.Helper()
	cfg, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range cfg.Storage.Files {
		if f.Path == path {
			u, err := dataurl.DecodeString(*f.Contents.Source)
			if err != nil {
				t.Fatal(err)
			}
			return string(u.Data)
		}
	}
	for _, u := range cfg.Systemd.Units {
		if u.Name == path && u.Contents != nil {
			return *u.Contents
		}
	}
	t.Fatalf("no %s", path)
	return ""
}

// fill runs the script's placeholder part with bash on a copy of the
// rendered configuration, with env as kubeadm.service's environment.
func fill(t *testing.T, p *plan.Plan, env ...string) (string, string, error) {
	t.Helper()
	found, err := p.Kubeadm.Placeholders()
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "kubeadm.yml")
	if err := os.WriteFile(config, []byte(renderedFile(t, p, ConfigPath)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-e", "-c", fillPlaceholders(config, found))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(config)
	return string(b), string(out), err
}

func TestScriptFillsPlaceholdersFromAfterburn(t *testing.T) {
	p := placeholderPlan(t)
	found, err := p.Kubeadm.Placeholders()
	if err != nil || len(found) != 3 {
		t.Fatalf("placeholders %+v, %v; want 3", found, err)
	}
	if s := renderedFile(t, p, ScriptPath); !strings.Contains(s, "set -e\n"+fillPlaceholders(ConfigPath, found)) {
		t.Errorf("the script does not fill the placeholders first:\n%s", s)
	}
	unit := renderedFile(t, p, UnitName)
	for _, want := range []string{"EnvironmentFile=-" + MetadataEnvFile + "\n", "After=network-online.target containerd.service " + metadataUnit} {
		if !strings.Contains(unit, want) {
			t.Errorf("kubeadm.service lacks %q:\n%s", want, unit)
		}
	}

	hostname, _ := os.Hostname()
	for name, tc := range map[string]struct {
		env      []string
		hostname string
	}{
		"Flatcar on EC2":                                        {[]string{"COREOS_EC2_HOSTNAME=ip-10-0-0-7.ec2.internal", "COREOS_EC2_INSTANCE_ID=i-0f00", "COREOS_EC2_IPV4_LOCAL=10.0.0.7"}, "ip-10-0-0-7.ec2.internal"},
		"Afterburn on OpenStack":                                {[]string{"AFTERBURN_OPENSTACK_HOSTNAME=node-a", "AFTERBURN_OPENSTACK_INSTANCE_ID=i-0f00", "AFTERBURN_OPENSTACK_IPV4_LOCAL=10.0.0.7"}, "node-a"},
		"a provider's own (CUSTOM) attributes win":              {[]string{"COREOS_CUSTOM_HOSTNAME=custom", "COREOS_EC2_HOSTNAME=other", "COREOS_CUSTOM_INSTANCE_ID=i-0f00", "COREOS_CUSTOM_PRIVATE_IPV4=10.0.0.7"}, "custom"},
		"no hostname attribute (Azure): the machine's hostname": {[]string{"COREOS_CUSTOM_INSTANCE_ID=i-0f00", "COREOS_AZURE_IPV4_DYNAMIC=10.0.0.7"}, hostname},
	} {
		t.Run(name, func(t *testing.T) {
			out, log, err := fill(t, p, tc.env...)
			if err != nil {
				t.Fatalf("%v: %s", err, log)
			}
			var docs []map[string]any
			for _, d := range strings.Split(out, "\n---\n") {
				var m map[string]any
				if err := yaml.Unmarshal([]byte(strings.TrimPrefix(d, "---\n")), &m); err != nil {
					t.Fatalf("filled configuration does not parse: %v\n%s", err, out)
				}
				docs = append(docs, m)
			}
			nr := docs[len(docs)-1]["nodeRegistration"].(map[string]any)
			if nr["name"] != tc.hostname {
				t.Errorf("node name %v, want %s", nr["name"], tc.hostname)
			}
			args := map[string]any{}
			for _, a := range nr["kubeletExtraArgs"].([]any) {
				args[a.(map[string]any)["name"].(string)] = a.(map[string]any)["value"]
			}
			if args["provider-id"] != "openstack:///i-0f00" || args["node-ip"] != "10.0.0.7" {
				t.Errorf("kubelet args %v", args)
			}
			if strings.Contains(out, "{{") {
				t.Errorf("placeholders left:\n%s", out)
			}
			if err := consumers.Kubeadm([]byte(out)); err != nil {
				t.Error(err)
			}
		})
	}

	t.Run("missing attribute stops the bootstrap, naming it", func(t *testing.T) {
		_, log, err := fill(t, p, "COREOS_EC2_HOSTNAME=h", "COREOS_EC2_IPV4_LOCAL=10.0.0.7")
		if err == nil || !strings.Contains(log, "instance-id") {
			t.Errorf("err %v, log %q: want a failure naming instance-id", err, log)
		}
	})
	t.Run("a value that would break the YAML stops the bootstrap", func(t *testing.T) {
		_, log, err := fill(t, p, "COREOS_EC2_HOSTNAME=h': x", "COREOS_EC2_INSTANCE_ID=i", "COREOS_EC2_IPV4_LOCAL=10.0.0.7")
		if err == nil || !strings.Contains(log, "unexpected characters") {
			t.Errorf("err %v, log %q", err, log)
		}
	})
}

func TestNoPlaceholdersNoMetadataWiring(t *testing.T) {
	p, err := plan.Build(plantest.Input(plantest.Base(bootstrapv1.Ignition, plan.ActionJoin), plan.ActionJoin))
	if err != nil {
		t.Fatal(err)
	}
	if unit := renderedFile(t, p, UnitName); strings.Contains(unit, "metadata") {
		t.Errorf("kubeadm.service waits for metadata it does not use:\n%s", unit)
	}
}

func TestRefusesJinjaItCannotFill(t *testing.T) {
	for name, mutate := range map[string]func(*bootstrapv1.KubeadmConfigSpec){
		"a method call": func(s *bootstrapv1.KubeadmConfigSpec) {
			s.JoinConfiguration.NodeRegistration.Name = `{{ ds.meta_data.local_hostname.split(".")[0] }}`
		},
		"a file's content": func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/x", Content: "host={{ v1.local_hostname }}"})
		},
		"a command": func(s *bootstrapv1.KubeadmConfigSpec) {
			s.PreKubeadmCommands = append(s.PreKubeadmCommands, "hostnamectl set-hostname {{ ds.meta_data.hostname }}")
		},
	} {
		spec := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
		mutate(spec)
		p, err := plan.Build(plantest.Input(spec, plan.ActionJoin))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Build(p); err == nil {
			t.Errorf("%s: rendered, want a refusal", name)
		} else if strings.Contains(err.Error(), "split") || strings.Contains(err.Error(), "host=") {
			t.Errorf("%s: the error quotes the spec: %v", name, err)
		}
	}
}
