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
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/pkg/rawagent"
)

const (
	oldVersion = "v1.35.8"
	newVersion = "v1.36.3"
)

// versionNode is a node whose kubeadm and kubelet are scripts of
// oldVersion that log their calls, and a source serving those of
// newVersion laid out as dl.k8s.io, with their SHA-256 (the kubeadm's
// corrupted when corrupt). downloads counts the binaries fetched.
type versionNode struct {
	agent     *rawagent.Agent
	bin, log  string
	source    string
	downloads *atomic.Int32
}

func newVersionNode(t *testing.T, healthy int, corrupt bool) *versionNode {
	t.Helper()
	n := &versionNode{bin: t.TempDir(), downloads: &atomic.Int32{}}
	n.log = filepath.Join(n.bin, "log")
	n.agent = &rawagent.Agent{Root: t.TempDir(),
		Kubeadm:   fakeBinary(t, n.bin, "kubeadm", oldVersion, n.log),
		Kubelet:   fakeBinary(t, n.bin, "kubelet", oldVersion, n.log),
		Systemctl: recorder(t, n.bin, "systemctl", n.log, 0), KubeletHealthz: healthz(t, healthy)}
	served := map[string][]byte{}
	for _, name := range []string{"kubeadm", "kubelet"} {
		content := []byte(script(name, newVersion, n.log))
		sum := sha256.Sum256(content)
		if corrupt && name == "kubeadm" {
			sum[0]++
		}
		p := path.Join("/release", newVersion, "bin/linux", runtime.GOARCH, name)
		served[p], served[p+".sha256"] = content, []byte(hex.EncodeToString(sum[:])+"\n")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := served[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if !strings.HasSuffix(r.URL.Path, ".sha256") {
			n.downloads.Add(1)
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	n.source = srv.URL + "/release"
	return n
}

// script is a fake kubeadm or kubelet of version: it prints the version a
// kubelet prints and logs every other call with its version.
func script(name, version, log string) string {
	return "#!/bin/sh\nif [ \"$1\" = --version ]; then echo Kubernetes " + version + "; exit 0; fi\n" +
		"echo " + name + " " + version + " \"$@\" >> " + log + "\n"
}

func fakeBinary(t *testing.T, dir, name, version, log string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(script(name, version, log)), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func (n *versionNode) update(t *testing.T, binaries *rawv1.KubernetesBinaries) rawv1.NodeUpdateResult {
	t.Helper()
	return n.agent.Update(context.Background(), nodeUpdate(t, rawv1.NodeUpdate{ControlPlane: true, KubernetesVersion: newVersion, Binaries: binaries}))
}

func (n *versionNode) file(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.bin, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUpdateMovesTheNodeToItsVersion: a node of another Kubernetes version
// gets the new kubeadm and kubelet from the source, checked against their
// published SHA-256, before the new kubeadm upgrades its control plane and
// kubelet configuration and the kubelet restarts. Run again, it downloads
// nothing.
func TestUpdateMovesTheNodeToItsVersion(t *testing.T) {
	n := newVersionNode(t, http.StatusOK, false)
	if res := n.update(t, &rawv1.KubernetesBinaries{URL: n.source}); res.Step != "" {
		t.Fatalf("update failed at %s: %s", res.Step, res.Message)
	}
	for _, name := range []string{"kubeadm", "kubelet"} {
		if got := n.file(t, name); got != script(name, newVersion, n.log) {
			t.Errorf("%s was not replaced by the new version's:\n%s", name, got)
		}
		if fi, err := os.Stat(filepath.Join(n.bin, name)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v", name, fi, err)
		}
	}
	want := "kubeadm " + newVersion + " upgrade node phase control-plane --certificate-renewal=false\n" +
		"kubeadm " + newVersion + " upgrade node phase kubelet-config\n" +
		"systemctl restart kubelet\n"
	if got := n.file(t, "log"); got != want {
		t.Errorf("commands:\n%s\nwant:\n%s", got, want)
	}
	if res := n.update(t, &rawv1.KubernetesBinaries{URL: n.source}); res.Step != "" || n.downloads.Load() != 2 {
		t.Errorf("again: %+v, %d binaries downloaded in all, want 2", res, n.downloads.Load())
	}
}

// TestUpdateRefusesBinariesItCannotTrust: a kubeadm that does not match its
// published SHA-256, a source that cannot be reached (the message keeps
// its credentials out), and a document that names no source for another
// version all fail at the binaries step with the node's binaries as they
// were and nothing run.
func TestUpdateRefusesBinariesItCannotTrust(t *testing.T) {
	for name, tc := range map[string]struct {
		corrupt  bool
		binaries func(source string) *rawv1.KubernetesBinaries
		message  string
	}{
		"checksum":  {true, func(s string) *rawv1.KubernetesBinaries { return &rawv1.KubernetesBinaries{URL: s} }, "kubeadm " + newVersion + " does not match its published SHA-256"},
		"no source": {false, func(string) *rawv1.KubernetesBinaries { return nil }, "names no source"},
		"unreachable": {false, func(string) *rawv1.KubernetesBinaries {
			return &rawv1.KubernetesBinaries{URL: "http://mirror:s3cret@127.0.0.1:1/release"}
		}, "127.0.0.1:1/release/" + newVersion},
	} {
		t.Run(name, func(t *testing.T) {
			n := newVersionNode(t, http.StatusOK, tc.corrupt)
			res := n.update(t, tc.binaries(n.source))
			if res.Step != rawv1.StepBinaries || !strings.Contains(res.Message, tc.message) || strings.Contains(res.Message, "s3cret") {
				t.Fatalf("got %s: %s", res.Step, res.Message)
			}
			for _, name := range []string{"kubeadm", "kubelet"} {
				if got := n.file(t, name); got != script(name, oldVersion, n.log) {
					t.Errorf("%s changed:\n%s", name, got)
				}
			}
			if _, err := os.Stat(n.log); err == nil {
				t.Errorf("commands ran: %s", n.file(t, "log"))
			}
		})
	}
}

// TestUpdatePutsTheKubeletBack: a new kubelet that does not become healthy
// is replaced by the one the node ran, and the update fails at the
// restart.
func TestUpdatePutsTheKubeletBack(t *testing.T) {
	n := newVersionNode(t, http.StatusInternalServerError, false)
	n.agent.KubeletHealthTimeout = 1
	res := n.update(t, &rawv1.KubernetesBinaries{URL: n.source})
	if res.Step != rawv1.StepKubeletRestart {
		t.Fatalf("got %s: %s", res.Step, res.Message)
	}
	if got := n.file(t, "kubelet"); got != script("kubelet", oldVersion, n.log) {
		t.Errorf("the kubelet is not the one the node ran:\n%s", got)
	}
}
