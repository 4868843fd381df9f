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

package raw_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/raw"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

// agent does what an agent-based provider's agent does with raw bootstrap
// data: write the listed files, then hand the configuration to kubeadm.
type agent struct {
	t       *testing.T
	kubeadm string
	root    string // every file must land below it
}

func (a *agent) writeFiles(doc []byte) map[string][]byte {
	a.t.Helper()
	var files raw.FilesDocument
	if err := yaml.UnmarshalStrict(doc, &files); err != nil {
		a.t.Fatalf("files document: %v", err)
	}
	written := map[string][]byte{}
	for _, f := range files.Files {
		if !strings.HasPrefix(f.Path, a.root+"/") {
			a.t.Fatalf("file %s is outside the test root %s", f.Path, a.root)
		}
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			a.t.Fatal(err)
		}
		if err := os.WriteFile(f.Path, []byte(f.Content), 0o600); err != nil {
			a.t.Fatal(err)
		}
		written[f.Path] = []byte(f.Content)
	}
	return written
}

func (a *agent) kubeadmRun(args ...string) {
	a.t.Helper()
	out, err := exec.Command(a.kubeadm, args...).CombinedOutput()
	if err != nil {
		a.t.Fatalf("kubeadm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatal("not PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func verifyChain(t *testing.T, leafPEM, caPEM []byte, usage x509.ExtKeyUsage, what string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(parseCert(t, caPEM))
	if _, err := parseCert(t, leafPEM).Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("%s does not chain to the CA the plan carried: %v", what, err)
	}
}

// TestAgentRunsKubeadmOnRawData proves the raw format's design with real
// kubeadm: the files document gives kubeadm the cluster CAs, and kubeadm's
// certificate and kubeconfig phases, fed the raw value as-is, issue
// credentials that chain to those CAs instead of making new ones.
func TestAgentRunsKubeadmOnRawData(t *testing.T) {
	root := t.TempDir()
	pki := filepath.Join(root, "pki")
	spec := plantest.Base(bootstrapv1.Raw, plan.ActionInit)
	spec.ClusterConfiguration.CertificatesDir = pki

	p, err := plan.Build(plantest.Input(spec, plan.ActionInit))
	if err != nil {
		t.Fatal(err)
	}
	out, err := raw.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	if out.Files == nil {
		t.Fatal("an init machine must receive the cluster PKI")
	}

	a := &agent{t: t, kubeadm: testbin.MustPath(t, testbin.Kubeadm), root: root}
	written := a.writeFiles(out.Files)
	config := filepath.Join(root, "kubeadm.yaml")
	if err := os.WriteFile(config, out.Value, 0o600); err != nil {
		t.Fatal(err)
	}
	a.kubeadmRun("config", "validate", "--config", config)
	a.kubeadmRun("init", "phase", "certs", "all", "--config", config)
	kubeconfigDir := filepath.Join(root, "kubeconfig")
	a.kubeadmRun("init", "phase", "kubeconfig", "all", "--config", config, "--kubeconfig-dir", kubeconfigDir)

	// kubeadm kept the CAs it was given.
	for path, content := range written {
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("kubeadm replaced %s (err %v)", path, err)
		}
	}
	ca := written[filepath.Join(pki, "ca.crt")]
	if !bytes.Equal(ca, plantest.CACert()) {
		t.Fatal("the files document does not carry the plan's cluster CA")
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(pki, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	verifyChain(t, read("apiserver.crt"), ca, x509.ExtKeyUsageServerAuth, "apiserver.crt")
	verifyChain(t, read("apiserver-kubelet-client.crt"), ca, x509.ExtKeyUsageClientAuth, "apiserver-kubelet-client.crt")
	verifyChain(t, read("front-proxy-client.crt"), written[filepath.Join(pki, "front-proxy-ca.crt")], x509.ExtKeyUsageClientAuth, "front-proxy-client.crt")
	verifyChain(t, read("etcd/server.crt"), written[filepath.Join(pki, "etcd", "ca.crt")], x509.ExtKeyUsageServerAuth, "etcd/server.crt")
	if sans := parseCert(t, read("apiserver.crt")).DNSNames; !slices.Contains(sans, "api.example.com") {
		t.Errorf("apiserver.crt lacks the spec's certSAN: %v", sans)
	}

	admin, err := clientcmd.LoadFromFile(filepath.Join(kubeconfigDir, "admin.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range admin.AuthInfos {
		verifyChain(t, auth.ClientCertificateData, ca, x509.ExtKeyUsageClientAuth, "admin.conf client certificate")
	}
	for _, c := range admin.Clusters {
		if !bytes.Equal(c.CertificateAuthorityData, ca) || c.Server != "https://"+plantest.Cluster.ControlPlaneEndpoint {
			t.Errorf("admin.conf points at %s with another CA", c.Server)
		}
	}
}

// A raw control-plane join carries the same CAs; a worker join carries none.
func TestRawJoinCarriesPKIOnlyForControlPlanes(t *testing.T) {
	for _, action := range []plan.Action{plan.ActionJoinControlPlane, plan.ActionJoin} {
		p, err := plan.Build(plantest.Input(plantest.Base(bootstrapv1.Raw, action), action))
		if err != nil {
			t.Fatal(err)
		}
		out, err := raw.Render(p)
		if err != nil {
			t.Fatal(err)
		}
		if (out.Files != nil) != (action == plan.ActionJoinControlPlane) {
			t.Errorf("%s: files document present = %v", action, out.Files != nil)
		}
	}
}

// TestRawRefusesWhatItCannotCarry: a spec with more than kubeadm's
// configuration is refused before anything renders, every field named
// (plan.Build applies the rule table for every format).
func TestRawRefusesWhatItCannotCarry(t *testing.T) {
	spec := plantest.Full(bootstrapv1.CloudConfig, plan.ActionJoin)
	spec.Format = bootstrapv1.Raw
	_, err := plan.Build(plantest.Input(spec, plan.ActionJoin))
	if err == nil {
		t.Fatal("raw planned a spec with files, users and commands")
	}
	for _, want := range []string{"spec.files[0]", "users", "ntp", "diskSetup", "mounts", "bootCommands", "preKubeadmCommands", "postKubeadmCommands", "verbosity"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
}

// A spec's kubeadm patches travel in the files document, for every action;
// any other file is refused (admission refuses it first, naming the path).
func TestRawCarriesKubeadmPatches(t *testing.T) {
	const patch = "/etc/kubeadm/patches/kubeletconfiguration+merge.yaml"
	for _, action := range []plan.Action{plan.ActionInit, plan.ActionJoinControlPlane, plan.ActionJoin} {
		spec := plantest.Base(bootstrapv1.Raw, action)
		spec.InitConfiguration.Patches.Directory = "/etc/kubeadm/patches"
		spec.JoinConfiguration.Patches.Directory = "/etc/kubeadm/patches"
		spec.Files = []upstreambootstrapv1.File{{Path: patch, Permissions: "0644", Content: "cgroupDriver: cgroupfs\n"}}
		p, err := plan.Build(plantest.Input(spec, action))
		if err != nil {
			t.Fatal(err)
		}
		out, err := raw.Render(p)
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		var files raw.FilesDocument
		if err := yaml.UnmarshalStrict(out.Files, &files); err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		i := slices.IndexFunc(files.Files, func(f rawv1.File) bool { return f.Path == patch })
		if i < 0 || files.Files[i].Content != "cgroupDriver: cgroupfs\n" || files.Files[i].Permissions != "0644" {
			t.Errorf("%s: the patch is not in the files document as given: %+v", action, files.Files)
		}
		if !bytes.Contains(out.Value, []byte("directory: /etc/kubeadm/patches")) {
			t.Errorf("%s: kubeadm's configuration does not name the patches directory", action)
		}

		spec.Files = append(spec.Files, upstreambootstrapv1.File{Path: "/etc/motd", Content: "hi\n"})
		if _, err := plan.Build(plantest.Input(spec, action)); err == nil || !strings.Contains(err.Error(), "spec.files[1]") {
			t.Errorf("%s: a file that is no kubeadm patch: %v", action, err)
		}
	}
}
