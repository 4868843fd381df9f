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

package bootstrapdata_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstrapdata"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/ignition"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/pkg/rawagent"
)

// machineMetadata is one machine, as each format's platform describes it.
var machineMetadata = map[rawv1.MetadataKey]string{
	rawv1.MetadataLocalHostname: "node-7.example.internal",
	rawv1.MetadataInstanceID:    "i-0123abcd",
	rawv1.MetadataLocalIPv4:     "10.20.30.7",
}

// withPlaceholders puts placeholders where real templates do, in the
// spellings they use: node names and kubelet arguments.
func withPlaceholders(format bootstrapv1.Format, action plan.Action) *bootstrapv1.KubeadmConfigSpec {
	spec := plantest.Base(format, action)
	for _, nr := range []*upstreambootstrapv1.NodeRegistrationOptions{&spec.InitConfiguration.NodeRegistration, &spec.JoinConfiguration.NodeRegistration} {
		nr.Name = `{{ ds.meta_data["local_hostname"] }}`
		nr.KubeletExtraArgs = append(nr.KubeletExtraArgs,
			upstreambootstrapv1.Arg{Name: "provider-id", Value: ptr.To("openstack:///'{{ instance_id }}'")},
			upstreambootstrapv1.Arg{Name: "node-ip", Value: ptr.To("{{ ds.meta_data.local_ipv4 }}")},
			upstreambootstrapv1.Arg{Name: "node-labels", Value: ptr.To("host={{ v1.local_hostname }}")})
	}
	return spec
}

// kubeadmConfigOnMachine is the kubeadm configuration a machine hands to
// kubeadm once the format's consumer filled the placeholders: cloud-init's
// own Jinja, the Ignition script (its part before kubeadm, with Afterburn's
// attributes as the unit's environment), or the raw agent.
func kubeadmConfigOnMachine(t *testing.T, d *bootstrapdata.Data) []byte {
	t.Helper()
	switch d.Format {
	case bootstrapv1.CloudConfig:
		md := map[string]string{}
		for k, v := range machineMetadata {
			md[string(k)] = v
		}
		rendered, err := consumers.CloudInitRender(d.Value, md)
		if err != nil {
			t.Fatal(err)
		}
		_, config, err := consumers.KubeadmConfigIn("cloud-config", rendered)
		if err != nil {
			t.Fatal(err)
		}
		return config
	case bootstrapv1.Ignition:
		files := map[string]string{}
		for _, p := range []string{ignition.ConfigPath, ignition.ScriptPath} {
			content, err := consumers.IgnitionFile(d.Value, p)
			if err != nil {
				t.Fatal(err)
			}
			files[p] = string(content)
		}
		script := files[ignition.ScriptPath]
		before, _, ok := strings.Cut(script, "\nkubeadm ")
		if !ok {
			t.Fatalf("the script runs no kubeadm:\n%s", script)
		}
		config := filepath.Join(t.TempDir(), "kubeadm.yml")
		if err := os.WriteFile(config, []byte(files[ignition.ConfigPath]), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", strings.ReplaceAll(before, ignition.ConfigPath, config))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"),
			"COREOS_OPENSTACK_HOSTNAME=" + machineMetadata[rawv1.MetadataLocalHostname],
			"COREOS_OPENSTACK_INSTANCE_ID=" + machineMetadata[rawv1.MetadataInstanceID],
			"COREOS_OPENSTACK_IPV4_LOCAL=" + machineMetadata[rawv1.MetadataLocalIPv4]}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the script's part before kubeadm: %v\n%s", err, out)
		}
		b, err := os.ReadFile(config)
		if err != nil {
			t.Fatal(err)
		}
		return b
	case bootstrapv1.Raw:
		p, err := rawagent.Parse(d.SecretData())
		if err != nil {
			t.Fatal(err)
		}
		config, err := p.Fill(machineMetadata)
		if err != nil {
			t.Fatal(err)
		}
		return config
	}
	t.Fatalf("format %s", d.Format)
	return nil
}

func documents(t *testing.T, stream []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range strings.Split("\n"+string(stream), "\n---\n") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("%v\n%s", err, stream)
		}
		out = append(out, m)
	}
	return out
}

// TestPlaceholdersReachKubeadmFilledAlikeInEveryFormat renders one spec with
// placeholders in every format and lets each format's own consumer fill
// them: kubeadm must get the same configuration from all three, valid for
// kubeadm, with the machine's metadata where the spec had placeholders.
func TestPlaceholdersReachKubeadmFilledAlikeInEveryFormat(t *testing.T) {
	for _, action := range plan.Actions {
		t.Run(string(action), func(t *testing.T) {
			var reference []map[string]any
			for _, format := range bootstrapv1.Formats {
				_, d := render(t, withPlaceholders(format, action), action)
				config := kubeadmConfigOnMachine(t, d)
				if strings.Contains(string(config), "{{") {
					t.Fatalf("%s: placeholders reach kubeadm:\n%s", format, config)
				}
				docs := documents(t, config)
				for _, doc := range docs {
					nr, ok := doc["nodeRegistration"].(map[string]any)
					if !ok {
						continue
					}
					if nr["name"] != machineMetadata[rawv1.MetadataLocalHostname] {
						t.Errorf("%s: node name %v", format, nr["name"])
					}
					got := map[string]any{}
					for _, a := range nr["kubeletExtraArgs"].([]any) {
						got[a.(map[string]any)["name"].(string)] = a.(map[string]any)["value"]
					}
					want := map[string]any{"provider-id": "openstack:///'i-0123abcd'", "node-ip": "10.20.30.7", "node-labels": "host=node-7.example.internal"}
					for k, v := range want {
						if got[k] != v {
							t.Errorf("%s: kubelet arg %s = %v, want %v", format, k, got[k], v)
						}
					}
				}
				if reference == nil {
					reference = docs
					if err := consumers.Kubeadm(config); err != nil {
						t.Error(err)
					}
				} else if diff := cmp.Diff(reference, docs); diff != "" {
					t.Errorf("%s: kubeadm gets another configuration than from %s (-%s +%s):\n%s", format, bootstrapv1.Formats[0], bootstrapv1.Formats[0], format, diff)
				}
			}
		})
	}
}
