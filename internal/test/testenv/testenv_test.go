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

package testenv_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

// The API server that tests and `make run` start reports the version it was
// built from, as a released kube-apiserver does, so that kubectl, clusterctl
// and Cluster API's version checks accept it.
func TestAPIServerReportsItsVersion(t *testing.T) {
	env := testenv.Start(t, testenv.Options{WithClusterAPI: true})
	want := testbin.Versions["KUBERNETES_VERSION"]

	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != want || info.Major != "1" || info.Minor == "" {
		t.Errorf("server version %+v, want %s", info, want)
	}

	kubeconfig, err := env.WriteAdminKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testbin.MustPath(t, testbin.Kubectl), "--kubeconfig", kubeconfig, "version", "-o", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	var v struct {
		ClientVersion, ServerVersion struct{ GitVersion string }
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v.ClientVersion.GitVersion != want || v.ServerVersion.GitVersion != want {
		t.Errorf("kubectl version: client %s, server %s; want %s for both", v.ClientVersion.GitVersion, v.ServerVersion.GitVersion, want)
	}

	// clusterctl checks the management cluster's version before init, move,
	// delete and upgrade; upgrade plan changes nothing but clusterctl's
	// inventory CRD. Past the check it looks for release news and then stops
	// on an empty management cluster (no core provider installed here).
	cmd := exec.Command(testbin.MustPath(t, testbin.Clusterctl), "upgrade", "plan", "--kubeconfig", kubeconfig)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	out, _ = cmd.CombinedOutput()
	if !strings.Contains(string(out), "Checking new release availability") || !strings.Contains(string(out), "there must be one core provider, found 0") {
		t.Errorf("clusterctl upgrade plan did not get past its management cluster checks:\n%s", out)
	}
}
