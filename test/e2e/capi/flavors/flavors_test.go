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

package flavors

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// dataDir is where test/tools/e2eflavors writes the templates.
var dataDir = filepath.Join("..", "data", "infrastructure-simulated")

// TestCommittedTemplatesAreCurrent regenerates every template and compares it
// with the committed file: a change to the stack's builders must be
// regenerated (make generate) for the specs to apply it.
func TestCommittedTemplatesAreCurrent(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names(files) {
		committed, err := os.ReadFile(filepath.Join(dataDir, name))
		if err != nil {
			t.Errorf("%s: %v (run make generate)", name, err)
			continue
		}
		if !bytes.Equal(committed, files[name]) {
			t.Errorf("%s differs from what the stack's builders make: run make generate", name)
		}
	}
	written, err := filepath.Glob(filepath.Join(dataDir, "cluster*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(files) {
		t.Errorf("%d templates in %s, the builders make %d: remove the stale ones", len(written), dataDir, len(files))
	}
}

// TestTemplatesLeaveNoSentinel checks that every number and version standing
// for a variable became the variable, and that every document parses.
func TestTemplatesLeaveNoSentinel(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names(files) {
		s := string(files[name])
		for _, v := range []string{"987001", "987002", "987003", "v1.36"} {
			if strings.Contains(s, v) {
				t.Errorf("%s still holds %q", name, v)
			}
		}
		for _, v := range []string{"${CLUSTER_NAME}", "${KUBERNETES_VERSION}", "${CONTROL_PLANE_MACHINE_COUNT}"} {
			if strings.HasPrefix(name, "cluster-template") && !strings.Contains(s, v) {
				t.Errorf("%s lacks %s", name, v)
			}
		}
		for i, doc := range strings.Split(s, "\n---\n")[1:] {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj["kind"] == nil {
				t.Errorf("%s document %d: %v", name, i+1, err)
			}
		}
	}
}

// TestFormatsFlavorTakesTheFormatVariable processes the formats flavor as
// clusterctl generate cluster does: the format variable reaches the control
// plane's format annotation and the workers' variable, cloud-config when
// the variable is unset.
func TestFormatsFlavorTakesTheFormatVariable(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	template := files[TemplateName(FormatsFlavor, bootstrapv1.CloudConfig)]
	for _, set := range []string{"", "raw", "ignition"} {
		out, err := yamlprocessor.NewSimpleProcessor().Process(template, func(name string) (string, error) {
			switch {
			case name != FormatVariable:
				return "x", nil
			case set == "":
				return "", errors.New("not set")
			}
			return set, nil
		})
		if err != nil {
			t.Fatalf("%s=%q: %v", FormatVariable, set, err)
		}
		var cluster struct {
			Spec struct {
				Topology struct {
					ControlPlane struct {
						Metadata struct{ Annotations map[string]string }
					} `json:"controlPlane"`
					Workers struct {
						MachineDeployments []struct {
							Variables struct {
								Overrides []struct{ Value string }
							}
						} `json:"machineDeployments"`
					}
				}
			}
		}
		if err := yaml.Unmarshal(bytes.SplitN(out, []byte("\n---\n"), 2)[1], &cluster); err != nil {
			t.Fatal(err)
		}
		want := set
		if want == "" {
			want = string(bootstrapv1.CloudConfig)
		}
		topology := cluster.Spec.Topology
		if got := topology.ControlPlane.Metadata.Annotations[bootstrapv1.FormatAnnotation]; got != want {
			t.Errorf("%s=%q: control plane's format annotation %q, want %q", FormatVariable, set, got, want)
		}
		if len(topology.Workers.MachineDeployments) != 1 || topology.Workers.MachineDeployments[0].Variables.Overrides[0].Value != want {
			t.Errorf("%s=%q: workers %+v, want the format %q", FormatVariable, set, topology.Workers, want)
		}
	}
}

// TestConfigListsEveryTemplate checks that the e2e config copies every
// template into the clusterctl repository: clusterctl finds no other.
func TestConfigListsEveryTemplate(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join("..", "config", "simulated.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names(files) {
		if !strings.Contains(string(config), "sourcePath: ../data/infrastructure-simulated/"+name+"\n") {
			t.Errorf("config/simulated.yaml does not copy %s into the repository", name)
		}
	}
}
