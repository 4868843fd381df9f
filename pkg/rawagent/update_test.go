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

package rawagent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/pkg/rawagent"
)

// recorder is a fake command that appends its name and arguments to log
// and exits with code.
func recorder(t *testing.T, dir, name, log string, code int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	script := "#!/bin/sh\necho " + name + " \"$@\" >> " + log + "\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// healthz is a kubelet health endpoint answering code.
func healthz(t *testing.T, code int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

func nodeUpdate(t *testing.T, u rawv1.NodeUpdate) []byte {
	t.Helper()
	u.APIVersion, u.Kind = rawv1.GroupVersion, rawv1.NodeUpdateKind
	var err error
	if u.Digest, err = u.ComputeDigest(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUpdateRunsItsStepsInOrder: a control plane's update writes the files
// (an appending one once, however often it runs), writes its manifests and
// kubelet configuration with kubeadm, its flags, and restarts the kubelet.
func TestUpdateRunsItsStepsInOrder(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	log := filepath.Join(bin, "log")
	a := &rawagent.Agent{Root: root, Kubeadm: recorder(t, bin, "kubeadm", log, 0), Systemctl: recorder(t, bin, "systemctl", log, 0),
		KubeletHealthz: healthz(t, http.StatusOK)}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/hosts"), []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := nodeUpdate(t, rawv1.NodeUpdate{
		ControlPlane: true,
		Files: []rawv1.UpdateFile{
			{Path: "/etc/motd", Content: []byte("hello\n"), Permissions: "0600"},
			{Path: "/etc/hosts", Content: []byte("10.0.0.1 cp\n"), Append: true},
		},
		KubeletExtraArgs: []rawv1.Arg{{Name: "node-labels", Value: "tier=a"}},
		PatchesDirectory: "/etc/kubeadm/patches",
	})
	for range 2 {
		if res := a.Update(context.Background(), doc); res.Step != "" {
			t.Fatalf("update failed at %s: %s", res.Step, res.Message)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/hosts")); string(b) != "127.0.0.1 localhost\n10.0.0.1 cp\n" {
		t.Errorf("appended file: %q", b)
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/motd")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("/etc/motd: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, rawagent.KubeletFlagsPath)); string(b) != "KUBELET_KUBEADM_ARGS=\"--node-labels=tier=a\"\n" {
		t.Errorf("kubelet flags: %q", b)
	}
	patches := filepath.Join(root, "etc/kubeadm/patches")
	want := strings.Repeat("kubeadm upgrade node phase control-plane --certificate-renewal=false --patches "+patches+"\n"+
		"kubeadm upgrade node phase kubelet-config --patches "+patches+"\n"+
		"systemctl restart kubelet\n", 2)
	if b, _ := os.ReadFile(log); string(b) != want {
		t.Errorf("commands:\n%s\nwant:\n%s", b, want)
	}
}

// TestUpdateNamesTheStepThatFailed: a worker's failing kubeadm stops the
// update at the kubelet step, with no file content in the message; a
// document that does not match its digest is refused before anything.
func TestUpdateNamesTheStepThatFailed(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	log := filepath.Join(bin, "log")
	a := &rawagent.Agent{Root: root, Kubeadm: recorder(t, bin, "kubeadm", log, 1), Systemctl: recorder(t, bin, "systemctl", log, 0),
		KubeletHealthz: healthz(t, http.StatusOK)}
	doc := nodeUpdate(t, rawv1.NodeUpdate{Files: []rawv1.UpdateFile{{Path: "/etc/secret", Content: []byte("S3CRET")}}})
	res := a.Update(context.Background(), doc)
	if res.Step != rawv1.StepKubeletConfig || !strings.Contains(res.Message, "kubelet-config") || strings.Contains(res.Message, "S3CRET") {
		t.Errorf("result %+v", res)
	}
	if b, _ := os.ReadFile(log); strings.Contains(string(b), "systemctl") || strings.Contains(string(b), "control-plane") {
		t.Errorf("a worker's failed update ran on: %s", b)
	}

	tampered := strings.Replace(string(doc), `"path":"/etc/secret"`, `"path":"/etc/other"`, 1)
	if res := a.Update(context.Background(), []byte(tampered)); res.Step != rawv1.StepRead || !strings.Contains(res.Message, "digest") {
		t.Errorf("a tampered document: %+v", res)
	}
}

// TestKubeletFlagsAsKubeadmWritesThem: kubeadm's own flags stay, sorted,
// unless the spec replaces them; the spec's flags follow in spec order;
// the quoting is Go's, as kubeadm's.
func TestKubeletFlagsAsKubeadmWritesThem(t *testing.T) {
	for _, tc := range []struct {
		name, current string
		extra         []rawv1.Arg
		want          string
	}{
		{name: "no file", want: `KUBELET_KUBEADM_ARGS=""` + "\n"},
		{name: "old extras go",
			current: `KUBELET_KUBEADM_ARGS="--hostname-override=n1 --container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-labels=old=1 --v=2"`,
			extra:   []rawv1.Arg{{Name: "v", Value: "4"}, {Name: "cloud-provider", Value: "external"}},
			want:    `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --hostname-override=n1 --v=4 --cloud-provider=external"` + "\n"},
		{name: "the spec replaces kubeadm's",
			current: `KUBELET_KUBEADM_ARGS="--hostname-override=n1"`,
			extra:   []rawv1.Arg{{Name: "hostname-override", Value: "n2"}},
			want:    `KUBELET_KUBEADM_ARGS="--hostname-override=n2"` + "\n"},
		{name: "quotes in a value",
			extra: []rawv1.Arg{{Name: "node-labels", Value: `a="b"`}},
			want:  `KUBELET_KUBEADM_ARGS="--node-labels=a=\"b\""` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rawagent.KubeletFlags([]byte(tc.current), tc.extra)
			if err != nil || string(got) != tc.want {
				t.Errorf("got %q (%v), want %q", got, err, tc.want)
			}
		})
	}
	if _, err := rawagent.KubeletFlags([]byte("FOO=bar"), nil); err == nil {
		t.Error("a file that is not kubeadm's was taken")
	}
}

// TestUnhealthyKubeletGetsItsFilesBack: a kubelet that does not become
// healthy after the update runs again with the flags and configuration it
// had, and the update fails at the restart.
func TestUnhealthyKubeletGetsItsFilesBack(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	log := filepath.Join(bin, "log")
	a := &rawagent.Agent{Root: root, Kubeadm: recorder(t, bin, "kubeadm", log, 0), Systemctl: recorder(t, bin, "systemctl", log, 0),
		KubeletHealthz: healthz(t, http.StatusInternalServerError), KubeletHealthTimeout: 2 * time.Second}
	before := map[string]string{
		rawagent.KubeletFlagsPath:  `KUBELET_KUBEADM_ARGS="--v=2"` + "\n",
		rawagent.KubeletConfigPath: "kind: KubeletConfiguration\n",
	}
	for p, c := range before {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := a.Update(context.Background(), nodeUpdate(t, rawv1.NodeUpdate{KubeletExtraArgs: []rawv1.Arg{{Name: "v", Value: "9"}}}))
	if res.Step != rawv1.StepKubeletRestart || !strings.Contains(res.Message, "previous") {
		t.Errorf("result %+v", res)
	}
	for p, c := range before {
		if b, _ := os.ReadFile(filepath.Join(root, p)); string(b) != c {
			t.Errorf("%s: %q, want the previous %q", p, b, c)
		}
	}
	if b, _ := os.ReadFile(log); strings.Count(string(b), "systemctl restart kubelet") != 2 {
		t.Errorf("commands: %s", b)
	}
}

// TestTemplatedFlagsKeepTheMachinesValue: a flag whose spec value holds
// Jinja keeps the value the machine's first boot gave it; a new one is
// filled from the agent's metadata, or refused when it cannot be.
func TestTemplatedFlagsKeepTheMachinesValue(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	log := filepath.Join(bin, "log")
	a := &rawagent.Agent{Root: root, Kubeadm: recorder(t, bin, "kubeadm", log, 0), Systemctl: recorder(t, bin, "systemctl", log, 0),
		KubeletHealthz: healthz(t, http.StatusOK), Metadata: map[rawv1.MetadataKey]string{rawv1.MetadataLocalHostname: "node-a"}}
	flags := filepath.Join(root, rawagent.KubeletFlagsPath)
	if err := os.MkdirAll(filepath.Dir(flags), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(flags, []byte(`KUBELET_KUBEADM_ARGS="--provider-id=sim://i-123"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := "{{ ds.meta_data.instance_id }}"
	name := "{{ ds.meta_data.local_hostname }}"
	u := rawv1.NodeUpdate{
		KubeletExtraArgs: []rawv1.Arg{{Name: "provider-id", Value: "sim://" + id, Templated: true}, {Name: "node-labels", Value: "host=" + name, Templated: true}},
		Placeholders:     []rawv1.Placeholder{{Text: id, Metadata: rawv1.MetadataInstanceID}, {Text: name, Metadata: rawv1.MetadataLocalHostname}},
	}
	if res := a.Update(context.Background(), nodeUpdate(t, u)); res.Step != "" {
		t.Fatalf("update failed at %s: %s", res.Step, res.Message)
	}
	if b, _ := os.ReadFile(flags); string(b) != `KUBELET_KUBEADM_ARGS="--provider-id=sim://i-123 --node-labels=host=node-a"`+"\n" {
		t.Errorf("flags: %q", b)
	}
	u.KubeletExtraArgs = append(u.KubeletExtraArgs, rawv1.Arg{Name: "node-ip", Value: "{{ ds.meta_data.local_ipv4 }}", Templated: true})
	if res := a.Update(context.Background(), nodeUpdate(t, u)); res.Step != rawv1.StepKubeletConfig || !strings.Contains(res.Message, "--node-ip") {
		t.Errorf("a templated flag without a value: %+v", res)
	}
}
