//go:build versionmatrix

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
	"path/filepath"
	"testing"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstrapdata"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/moduledir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

// cloudConfigTemplates are infrastructure providers' released cluster
// templates for cloud-init machines, beside the Flatcar ones above.
var cloudConfigTemplates = []struct {
	module, version string
	files           []string
}{
	{"sigs.k8s.io/cluster-api-provider-aws/v2", "v2.13.0", []string{"templates/cluster-template.yaml", "templates/cluster-template-machinepool.yaml"}},
	{"sigs.k8s.io/cluster-api-provider-azure", "v1.21.0", []string{"templates/cluster-template.yaml", "templates/cluster-template-machinepool.yaml"}},
	{"sigs.k8s.io/cluster-api-provider-openstack", "v0.13.0", []string{"templates/cluster-template.yaml"}},
	{"sigs.k8s.io/cluster-api-provider-vsphere", "v1.14.0", []string{"templates/cluster-template.yaml"}},
	{"github.com/ionos-cloud/cluster-api-provider-proxmox", "v0.7.0", []string{"templates/cluster-template.yaml"}},
}

// matrixCase is one spec the matrix renders, with the actions it renders for.
type matrixCase struct {
	name    string
	spec    *bootstrapv1.KubeadmConfigSpec
	actions []plan.Action
}

// matrixCorpus is every golden case and every KubeadmConfigSpec of the real
// templates that admission admits (the Flatcar ones' refusals are listed in
// expectedRefusals; the cloud-init ones have none).
func matrixCorpus(t *testing.T) []matrixCase {
	t.Helper()
	gates := allGatesOn(t)
	var out []matrixCase
	for _, c := range goldenCases() {
		out = append(out, matrixCase{c.name, c.spec, []plan.Action{c.action}})
	}
	templates := append(cloudConfigTemplates[:len(cloudConfigTemplates):len(cloudConfigTemplates)], flatcarTemplates...)
	for _, src := range templates {
		dir := moduledir.Of(t, src.module, src.version)
		for _, file := range src.files {
			for _, ts := range specsOf(t, filepath.Join(dir, file)) {
				name := src.module + "/" + file + ": " + ts.name
				if _, admitted := admit(t, ts.spec, gates, expectedRefusals[name]); admitted {
					out = append(out, matrixCase{name, ts.spec, ts.actions})
				}
			}
		}
	}
	return out
}

// TestVersionMatrix: for each supported Kubernetes minor, that minor's
// kubeadm accepts the kubeadm configuration every format renders for a
// machine of that version, from the golden cases and from real templates,
// after the machine filled its placeholders. make test-versions runs it
// (the kubeadm builds are its own: hack/tools.sh kubeadm-matrix).
func TestVersionMatrix(t *testing.T) {
	corpus := matrixCorpus(t)
	for _, version := range testbin.MatrixVersions() {
		t.Run(version, func(t *testing.T) {
			if _, err := testbin.KubeadmOf(version); err != nil {
				t.Fatal(err)
			}
			for _, c := range corpus {
				for _, action := range c.actions {
					t.Run(c.name+"/"+string(action), func(t *testing.T) {
						t.Parallel()
						checkForVersion(t, c.spec, action, version)
					})
				}
			}
		})
	}
}

func checkForVersion(t *testing.T, spec *bootstrapv1.KubeadmConfigSpec, action plan.Action, version string) {
	in := plantest.Input(spec, action)
	in.Cluster.KubernetesVersion = version
	// Files from secrets (Azure's cloud provider config) get a stand-in.
	in.ReadSecret = func(ref plan.SecretRef) ([]byte, error) { return []byte("from secret " + ref.Name + "\n"), nil }
	p, err := plan.Build(in)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	d, err := bootstrapdata.Render(p)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	writeDiscoveryFiles(t, p)
	if err := consumers.KubeadmOf(version, machineKubeadmConfig(t, d)); err != nil {
		t.Error(err)
	}
}

// machineKubeadmConfig is what kubeadm reads on the machine: cloud-init's
// Jinja filled from the machine's metadata, the templates' own envsubst and
// sed references filled in Ignition's, the raw agent's fill.
func machineKubeadmConfig(t *testing.T, d *bootstrapdata.Data) []byte {
	t.Helper()
	if d.Format != bootstrapv1.Ignition {
		return kubeadmConfigOnMachine(t, d)
	}
	_, config, err := consumers.KubeadmConfigIn(string(d.Format), d.Value)
	if err != nil {
		t.Fatal(err)
	}
	return envReference.ReplaceAll(config, []byte("node-a"))
}
