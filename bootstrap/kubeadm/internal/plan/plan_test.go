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

package plan_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
)

func build(t *testing.T, in plan.Input) *plan.Plan {
	t.Helper()
	p, err := plan.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func docs(t *testing.T, p *plan.Plan) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range p.Kubeadm.Documents {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestInitDocumentsCarryClusterFacts(t *testing.T) {
	p := build(t, plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionInit), plan.ActionInit))
	d := docs(t, p)
	if len(d) != 2 || d[0]["kind"] != "ClusterConfiguration" || d[1]["kind"] != "InitConfiguration" {
		t.Fatalf("unexpected documents: %v", d)
	}
	cc := d[0]
	if cc["apiVersion"] != "kubeadm.k8s.io/v1beta4" || cc["kubernetesVersion"] != "v1.36.3" || cc["clusterName"] != "demo" ||
		cc["controlPlaneEndpoint"] != "10.0.0.1:6443" {
		t.Errorf("cluster facts missing: %v", cc)
	}
	networking := cc["networking"].(map[string]any)
	if networking["podSubnet"] != "192.168.0.0/16" || networking["serviceSubnet"] != "10.96.0.0/12" || networking["dnsDomain"] != "cluster.local" {
		t.Errorf("cluster network missing: %v", networking)
	}
	if got := p.KubeadmCommand(plan.InitConfigPath); got != "kubeadm init --config /run/kubeadm/kubeadm.yaml" {
		t.Errorf("command %q", got)
	}
	var certFiles int
	for _, f := range p.Files {
		if f.Kind == plan.FileCertificate {
			certFiles++
		}
	}
	if certFiles != 8 {
		t.Errorf("%d certificate files, want the 4 CA pairs", certFiles)
	}
}

func TestKubeadmAPIVersionFollowsKubernetesVersion(t *testing.T) {
	for version, want := range map[string]string{"v1.30.4": "kubeadm.k8s.io/v1beta3", "v1.31.0": "kubeadm.k8s.io/v1beta4", "1.36.3": "kubeadm.k8s.io/v1beta4"} {
		in := plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin), plan.ActionJoin)
		in.Cluster.KubernetesVersion = version
		p := build(t, in)
		if p.Kubeadm.APIVersion != want || docs(t, p)[0]["apiVersion"] != want {
			t.Errorf("%s: got %s, want %s", version, p.Kubeadm.APIVersion, want)
		}
	}
	in := plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin), plan.ActionJoin)
	in.Cluster.KubernetesVersion = "v1.21.0"
	if _, err := plan.Build(in); err == nil {
		t.Error("Kubernetes older than kubeadm v1beta3 accepted")
	}
}

func TestWorkerJoinDiscovery(t *testing.T) {
	p := build(t, plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin), plan.ActionJoin))
	jc := docs(t, p)[0]
	bt := jc["discovery"].(map[string]any)["bootstrapToken"].(map[string]any)
	if bt["token"] != plantest.Token || bt["apiServerEndpoint"] != "10.0.0.1:6443" || len(bt["caCertHashes"].([]any)) != 1 || bt["unsafeSkipCAVerification"] != nil {
		t.Errorf("discovery not pinned to the cluster: %v", bt)
	}
	taints := jc["nodeRegistration"].(map[string]any)["taints"].([]any)
	if len(taints) != 1 || taints[0].(map[string]any)["key"] != "node.cluster.x-k8s.io/uninitialized" {
		t.Errorf("worker lacks Cluster API's uninitialized taint: %v", taints)
	}
	for _, f := range p.Files {
		if f.Kind == plan.FileCertificate {
			t.Errorf("a worker got PKI file %s", f.Path)
		}
	}

	// Without a CA certificate discovery is unpinned, as upstream does.
	in := plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin), plan.ActionJoin)
	in.Certificates = secret.NewCertificatesForWorker("")
	bt = docs(t, build(t, in))[0]["discovery"].(map[string]any)["bootstrapToken"].(map[string]any)
	if skip, _ := bt["unsafeSkipCAVerification"].(bool); !skip {
		t.Errorf("expected unpinned discovery without a CA: %v", bt)
	}
}

func TestJoinErrorsNameTheField(t *testing.T) {
	cases := map[string]struct {
		mutate func(*plan.Input)
		want   string
	}{
		"worker with controlPlane": {func(in *plan.Input) {
			in.Spec.JoinConfiguration.ControlPlane = &upstreambootstrapv1.JoinControlPlane{}
		}, "spec.joinConfiguration.controlPlane"},
		"no endpoint": {func(in *plan.Input) { in.Cluster.ControlPlaneEndpoint = "" }, "spec.joinConfiguration.discovery.bootstrapToken.apiServerEndpoint"},
		"no token":    {func(in *plan.Input) { in.BootstrapToken = "" }, "spec.joinConfiguration.discovery.bootstrapToken.token"},
		"missing secret": {func(in *plan.Input) {
			in.Spec.Files = []upstreambootstrapv1.File{{Path: "/x", ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "nope", Key: "k"}}}}
		}, "spec.files[0].contentFrom.secret"},
		"template error": {func(in *plan.Input) {
			in.Spec.Files = []upstreambootstrapv1.File{{Path: "/x", Content: `{{ template "missing" }}`, ContentFormat: upstreambootstrapv1.FileContentFormatTemplate}}
		}, "spec.files[0]: template for /x fails"},
		"no version": {func(in *plan.Input) { in.Cluster.KubernetesVersion = "" }, "the machine has no Kubernetes version"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin), plan.ActionJoin)
			tc.mutate(&in)
			_, err := plan.Build(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error naming %q, got %v", tc.want, err)
			}
			if strings.Contains(err.Error(), plantest.Token) {
				t.Fatalf("error leaks the bootstrap token: %v", err)
			}
		})
	}
}

func TestControlPlaneNeedsCAKeys(t *testing.T) {
	for _, action := range []plan.Action{plan.ActionInit, plan.ActionJoinControlPlane} {
		in := plantest.Input(plantest.Base(bootstrapv1.CloudConfig, action), action)
		in.Certificates.GetByPurpose(secret.ClusterCA).KeyPair.Key = nil
		if _, err := plan.Build(in); err == nil || !strings.Contains(err.Error(), "cluster CA") {
			t.Errorf("%s without the CA key: %v", action, err)
		}
	}
	in := plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoinControlPlane), plan.ActionJoinControlPlane)
	in.Spec.JoinConfiguration.ControlPlane = nil
	p := build(t, in)
	if _, ok := docs(t, p)[0]["controlPlane"]; !ok {
		t.Error("a control-plane join without joinConfiguration.controlPlane must still join the control plane")
	}
}

func TestFilesResolveSecretsAndTemplates(t *testing.T) {
	s := plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin)
	plantest.Features[0].Apply(s) // files
	p := build(t, plantest.Input(s, plan.ActionJoin))
	byPath := map[string]plan.File{}
	for _, f := range p.Files {
		byPath[f.Path] = f
	}
	if got := byPath["/etc/motd"].Content; got != "from a secret\n" {
		t.Errorf("contentFrom not resolved: %q", got)
	}
	if got := byPath["/etc/version"].Content; got != "cp=v1.36.3\n" {
		t.Errorf("template not rendered: %q", got)
	}
	if !byPath["/etc/append.conf"].Append {
		t.Error("append lost")
	}
	for path, want := range map[string]string{"/etc/base64.conf": "hello base64\n", "/etc/gzip-base64.conf": "gzip and base64\n", "/etc/plain.conf": "plain text\n"} {
		got, err := byPath[path].Bytes()
		if err != nil || string(got) != want {
			t.Errorf("%s decodes to %q (%v), want %q", path, got, err, want)
		}
	}
}

func TestFileBytesEncodings(t *testing.T) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write([]byte("zipped"))
	_ = w.Close()
	cases := []struct {
		f       plan.File
		want    string
		wantErr bool
	}{
		{plan.File{Content: "x"}, "x", false},
		{plan.File{Content: base64.StdEncoding.EncodeToString([]byte("b64")), Encoding: upstreambootstrapv1.Base64}, "b64", false},
		{plan.File{Content: gz.String(), Encoding: upstreambootstrapv1.Gzip}, "zipped", false},
		{plan.File{Content: base64.StdEncoding.EncodeToString(gz.Bytes()), Encoding: upstreambootstrapv1.GzipBase64}, "zipped", false},
		{plan.File{Content: "not base64!", Encoding: upstreambootstrapv1.Base64, Source: "spec.files[3]"}, "", true},
		{plan.File{Content: "not gzip", Encoding: upstreambootstrapv1.Gzip, Source: "spec.files[4]"}, "", true},
	}
	for i, tc := range cases {
		got, err := tc.f.Bytes()
		if (err != nil) != tc.wantErr || string(got) != tc.want {
			t.Errorf("case %d: got %q, %v", i, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), tc.f.Source) {
			t.Errorf("case %d: error does not name the file: %v", i, err)
		}
	}
	if _, _, err := (plan.File{Permissions: "rw-r--r--", Source: "spec.files[0]"}).Mode(); err == nil {
		t.Error("non-octal permissions accepted")
	}
}

func TestPasswordFromSecretAndErrorsKeepSecretsOut(t *testing.T) {
	s := plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin)
	plantest.Features[1].Apply(s) // users
	p := build(t, plantest.Input(s, plan.ActionJoin))
	if p.Users[0].Passwd != string(plantest.Secrets[plan.SecretRef{Name: "users", Key: "ops-hash"}]) || p.Users[0].PasswdFrom.IsDefined() {
		t.Errorf("passwdFrom not resolved: %+v", p.Users[0])
	}

	in := plantest.Input(s, plan.ActionJoin)
	in.ReadSecret = func(plan.SecretRef) ([]byte, error) { return nil, errors.New("forbidden") }
	_, err := plan.Build(in)
	if err == nil || !strings.Contains(err.Error(), "spec.users[0].passwdFrom.secret") || strings.Contains(err.Error(), "$6$") {
		t.Errorf("unexpected error: %v", err)
	}
}

func TestFileDiscoveryWritesKubeconfig(t *testing.T) {
	s := plantest.Base(bootstrapv1.Raw, plan.ActionJoin)
	plantest.Features[len(plantest.Features)-1].Apply(s) // file-discovery
	p := build(t, plantest.Input(s, plan.ActionJoin))
	var kc *plan.File
	for i := range p.Files {
		if p.Files[i].Kind == plan.FileDiscoveryKubeconfig {
			kc = &p.Files[i]
		}
	}
	if kc == nil || kc.Path != plantest.DiscoveryKubeconfigPath {
		t.Fatalf("no discovery kubeconfig: %+v", p.Files)
	}
	var cfg struct {
		Clusters []struct {
			Cluster struct {
				Server                   string `json:"server"`
				CertificateAuthorityData []byte `json:"certificate-authority-data"`
			}
		}
		Users []struct {
			User struct {
				Exec struct{ Command, APIVersion string } `json:"exec"`
			}
		} `json:"users"`
	}
	if err := yaml.Unmarshal([]byte(kc.Content), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Clusters[0].Cluster.Server != "https://10.0.0.1:6443" || !bytes.Equal(cfg.Clusters[0].Cluster.CertificateAuthorityData, plantest.CACert()) {
		t.Errorf("kubeconfig cluster not filled from the cluster: %+v", cfg.Clusters)
	}
	if cfg.Users[0].User.Exec.Command != "/usr/local/bin/token-helper" || cfg.Users[0].User.Exec.APIVersion != "client.authentication.k8s.io/v1" {
		t.Errorf("exec user lost: %+v", cfg.Users)
	}
}

func TestWorkerTaintNotDuplicated(t *testing.T) {
	s := plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin)
	s.JoinConfiguration.NodeRegistration.Taints = ptr.To([]corev1.Taint{{Key: "node.cluster.x-k8s.io/uninitialized", Effect: corev1.TaintEffectNoSchedule}})
	taints := docs(t, build(t, plantest.Input(s, plan.ActionJoin)))[0]["nodeRegistration"].(map[string]any)["taints"].([]any)
	if len(taints) != 1 {
		t.Errorf("taint duplicated: %v", taints)
	}
}

// TestJoinedMachinePlanCarriesNoCredentials: the plan an in-place update
// applies to a machine that joined has the spec's files and kubelet flags
// but no discovery, token or key, and needs none of them.
func TestJoinedMachinePlanCarriesNoCredentials(t *testing.T) {
	for _, action := range []plan.Action{plan.ActionJoinControlPlane, plan.ActionJoin} {
		t.Run(string(action), func(t *testing.T) {
			in := plantest.Input(plantest.Base(bootstrapv1.CloudConfig, action), action)
			in.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs = []upstreambootstrapv1.Arg{{Name: "node-labels", Value: ptr.To("tier=a")}}
			in.Spec.Files = []upstreambootstrapv1.File{{Path: "/etc/a", Content: "a"}}
			in.Joined = true
			in.BootstrapToken = ""
			in.Certificates = nil
			p := build(t, in)
			if d, _ := docs(t, p)[0]["discovery"].(map[string]any); len(d) != 0 {
				t.Errorf("a joined machine's plan has discovery: %v", d)
			}
			if len(p.Files) != 1 || p.Files[0].Kind != plan.FileUser {
				t.Errorf("files %+v, want the spec's file only", p.Files)
			}
			if len(p.Kubeadm.KubeletExtraArgs) != 1 || p.Kubeadm.KubeletExtraArgs[0].Name != "node-labels" {
				t.Errorf("kubelet flags %+v, want the spec's", p.Kubeadm.KubeletExtraArgs)
			}
		})
	}
	in := plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionInit), plan.ActionInit)
	in.Joined = true
	if _, err := plan.Build(in); err == nil {
		t.Error("a joined machine was planned as kubeadm init")
	}
}
