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
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/hostile"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/pkg/rawagent"
)

const joinConfig = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n"

const initConfig = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n"

const filesDoc = `apiVersion: raw.bootstrap.cluster.x-k8s.io/v1alpha1
kind: BootstrapFiles
action: init
files:
- path: /etc/kubernetes/pki/ca.key
  permissions: "0600"
  content: SECRET-KEY-MATERIAL
- path: /etc/kubernetes/pki/ca.crt
  content: CERT
`

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   map[string][]byte
		action rawv1.Action
		err    string
	}{
		{name: "worker join", data: map[string][]byte{"format": []byte("raw"), "value": []byte(joinConfig)}, action: rawv1.ActionJoin},
		{name: "init with files", data: map[string][]byte{"format": []byte("raw"), "value": []byte(initConfig), "files": []byte(filesDoc)}, action: rawv1.ActionInit},
		{name: "init without files", data: map[string][]byte{"format": []byte("raw"), "value": []byte(initConfig)}, action: rawv1.ActionInit},
		{name: "cloud-config", data: map[string][]byte{"format": []byte("cloud-config"), "value": []byte("#cloud-config\n")}, err: `format "cloud-config"`},
		{name: "no value", data: map[string][]byte{"format": []byte("raw")}, err: "no kubeadm configuration"},
		{name: "not kubeadm", data: map[string][]byte{"format": []byte("raw"), "value": []byte("kind: Pod\n")}, err: "neither an InitConfiguration nor a JoinConfiguration"},
		{name: "action contradicts the configuration", data: map[string][]byte{"format": []byte("raw"), "value": []byte(joinConfig), "files": []byte(filesDoc)}, err: "action init, but"},
		{name: "relative path", data: map[string][]byte{"format": []byte("raw"), "value": []byte(initConfig),
			"files": []byte(strings.Replace(filesDoc, "/etc/kubernetes/pki/ca.crt", "../../etc/passwd", 1))}, err: "not a clean absolute path"},
		{name: "files is not a document", data: map[string][]byte{"format": []byte("raw"), "value": []byte(initConfig),
			"files": []byte("SECRET-KEY-MATERIAL: [")}, err: "not a BootstrapFiles document"},
		// 30 KiB that expand to 2.7 GB: refused before anything decodes it.
		{name: "files alias bomb", data: map[string][]byte{"format": []byte("raw"), "value": []byte(initConfig),
			"files": []byte(filesDoc + hostile.AliasBomb(14<<10, 100, 1900))}, err: "bootstrap data key files expands through YAML aliases"},
		{name: "value alias bomb", data: map[string][]byte{"format": []byte("raw"), "value": []byte(joinConfig + hostile.AliasBomb(14<<10, 100, 1900))},
			err: "bootstrap data key value expands through YAML aliases"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := rawagent.Parse(tc.data)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "SECRET-KEY-MATERIAL") {
					t.Fatalf("the error quotes the data: %v", err)
				}
				return
			}
			if err != nil || p.Action != tc.action {
				t.Fatalf("Parse: %v, action %q, want %q", err, p.Action, tc.action)
			}
		})
	}
}

// fakeKubeadm records its arguments and the configuration it was given.
func fakeKubeadm(t *testing.T, dir string, exit int) string {
	t.Helper()
	p := filepath.Join(dir, "kubeadm")
	script := "#!/bin/sh\necho \"$@\" > " + dir + "/args\ncp \"$3\" " + dir + "/config\nexit " + string(rune('0'+exit)) + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunWritesFilesRunsKubeadmAndTheSentinel(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	a := &rawagent.Agent{Kubeadm: fakeKubeadm(t, bin, 0), Root: root}
	data := map[string][]byte{"format": []byte("raw"), "value": []byte(initConfig), "files": []byte(filesDoc)}
	if err := a.Run(context.Background(), data); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(root, "etc/kubernetes/pki/ca.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key: %v, mode %v", err, st)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/kubernetes/pki/ca.crt")); string(b) != "CERT" {
		t.Fatalf("ca.crt holds %q", b)
	}
	args, _ := os.ReadFile(filepath.Join(bin, "args"))
	if want := "init --config " + filepath.Join(root, rawagent.DefaultConfigPath); strings.TrimSpace(string(args)) != want {
		t.Fatalf("kubeadm ran with %q, want %q", args, want)
	}
	if b, _ := os.ReadFile(filepath.Join(bin, "config")); string(b) != initConfig {
		t.Fatalf("kubeadm was given %q", b)
	}
	if _, err := os.Stat(filepath.Join(root, rawagent.DefaultConfigPath)); !os.IsNotExist(err) {
		t.Fatalf("the configuration (it holds the token) is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, rawv1.SuccessSentinel)); err != nil {
		t.Fatalf("no success sentinel: %v", err)
	}
}

func TestRunWithoutSuccessLeavesNoSentinel(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	a := &rawagent.Agent{Kubeadm: fakeKubeadm(t, bin, 1), Root: root}
	err := a.Run(context.Background(), map[string][]byte{"format": []byte("raw"), "value": []byte(joinConfig)})
	if err == nil || !strings.Contains(err.Error(), "kubeadm join") {
		t.Fatalf("error %v, want kubeadm join's failure", err)
	}
	if _, err := os.Stat(filepath.Join(root, rawv1.SuccessSentinel)); !os.IsNotExist(err) {
		t.Fatalf("sentinel written after a failure: %v", err)
	}
}

func TestFillReplacesDeclaredPlaceholders(t *testing.T) {
	value := joinConfig + "nodeRegistration:\n  name: '{{ ds.meta_data[''local_hostname''] }}'\n  kubeletExtraArgs:\n  - name: node-ip\n    value: '{{ ds.meta_data.local_ipv4 }}'\n"
	files := `apiVersion: raw.bootstrap.cluster.x-k8s.io/v1alpha1
kind: BootstrapFiles
action: join
files: []
placeholders:
- text: "{{ ds.meta_data[''local_hostname''] }}"
  metadata: local-hostname
- text: "{{ ds.meta_data.local_ipv4 }}"
  metadata: local-ipv4
`
	p, err := rawagent.Parse(map[string][]byte{"format": []byte("raw"), "value": []byte(value), "files": []byte(files)})
	if err != nil {
		t.Fatal(err)
	}
	md := map[rawv1.MetadataKey]string{rawv1.MetadataLocalHostname: "node-1", rawv1.MetadataLocalIPv4: "10.0.0.1"}
	got, err := p.Fill(md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "name: 'node-1'") || !strings.Contains(string(got), "value: '10.0.0.1'") || strings.Contains(string(got), "{{") {
		t.Errorf("filled:\n%s", got)
	}
	delete(md, rawv1.MetadataLocalIPv4)
	if _, err := p.Fill(md); err == nil || !strings.Contains(err.Error(), "local-ipv4") {
		t.Errorf("missing metadata: %v, want an error naming local-ipv4", err)
	}
	md[rawv1.MetadataLocalIPv4] = "10.0.0.1'\nkind: x"
	if _, err := p.Fill(md); err == nil {
		t.Error("a value that would break the YAML was accepted")
	}
}

// filesData is join data whose BootstrapFiles document writes one file.
func filesData(path, permissions, content string) map[string][]byte {
	doc := "apiVersion: raw.bootstrap.cluster.x-k8s.io/v1alpha1\nkind: BootstrapFiles\nfiles:\n- path: " + path +
		"\n  permissions: \"" + permissions + "\"\n  content: " + content + "\n"
	return map[string][]byte{"format": []byte("raw"), "value": []byte(joinConfig), "files": []byte(doc)}
}

// TestSpecialModeBits: set-user-ID, set-group-ID and sticky bits in a file's
// permissions reach the file (Go keeps them apart from the permission bits).
func TestSpecialModeBits(t *testing.T) {
	for permissions, want := range map[string]os.FileMode{
		"4755": os.ModeSetuid | 0o755,
		"2750": os.ModeSetgid | 0o750,
		"1777": os.ModeSticky | 0o777,
		"0640": 0o640,
	} {
		root, bin := t.TempDir(), t.TempDir()
		a := &rawagent.Agent{Kubeadm: fakeKubeadm(t, bin, 0), Root: root}
		if err := a.Run(context.Background(), filesData("/usr/local/bin/tool", permissions, "x")); err != nil {
			t.Fatalf("%s: %v", permissions, err)
		}
		fi, err := os.Stat(filepath.Join(root, "usr/local/bin/tool"))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != want {
			t.Errorf("permissions %s: mode %v, want %v", permissions, got, want)
		}
	}
}

// TestWritesStayBeneathRoot: a symbolic link where a file goes is replaced,
// not followed; a symbolic link on the way that leads out of the root makes
// the write fail; nothing outside the root is written.
func TestWritesStayBeneathRoot(t *testing.T) {
	root, bin, outside := t.TempDir(), t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/kubernetes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "etc/kubernetes/admin.key")); err != nil {
		t.Fatal(err)
	}
	a := &rawagent.Agent{Kubeadm: fakeKubeadm(t, bin, 0), Root: root}
	if err := a.Run(context.Background(), filesData("/etc/kubernetes/admin.key", "0600", "KEY")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(root, "etc/kubernetes/admin.key"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the link where the file goes: %v %v, want a regular 0600 file", fi.Mode(), err)
	}

	if err := os.Symlink(outside, filepath.Join(root, "opt")); err != nil {
		t.Fatal(err)
	}
	err = a.Run(context.Background(), filesData("/opt/target", "0600", "KEY"))
	if err == nil || !strings.Contains(err.Error(), "/opt/target") || strings.Contains(err.Error(), "KEY") {
		t.Fatalf("a write through a link out of the root: %v, want an error naming the file and not its content", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "untouched" {
		t.Fatalf("a file outside the root was written: %q", b)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("files left outside the root: %v", entries)
	}
}

// TestContentNeverUnderAnOlderMode: a file that exists with a looser mode is
// replaced by a new file that had its final mode before anything could read
// it: whoever had the old file open reads the old content, never the key.
func TestContentNeverUnderAnOlderMode(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	path := filepath.Join(root, "etc/kubernetes/pki/ca.key")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("old public content"), 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	a := &rawagent.Agent{Kubeadm: fakeKubeadm(t, bin, 0), Root: root}
	if err := a.Run(context.Background(), filesData("/etc/kubernetes/pki/ca.key", "0600", "SECRET-KEY-MATERIAL")); err != nil {
		t.Fatal(err)
	}
	seen, err := io.ReadAll(reader)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(seen), "SECRET") {
		t.Fatalf("the key was written into the file opened at 0644: %q", seen)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(path); string(b) != "SECRET-KEY-MATERIAL" {
		t.Fatalf("the key file holds %q", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

// FuzzWritePaths: whatever path and permissions the data gives, and with
// links inside the root that lead out of it, the agent writes nothing
// outside its root and never panics.
func FuzzWritePaths(f *testing.F) {
	for _, seed := range []struct{ path, permissions string }{
		{"/etc/kubernetes/pki/ca.key", "0600"},
		{"/out/x", "4755"},
		{"/out/../../x", "0644"},
		{"/link-to-out", "0644"},
		{"/etc/../out/y", "7777"},
		{"/a/b/c/d", "99"},
	} {
		f.Add(seed.path, seed.permissions)
	}
	f.Fuzz(func(t *testing.T, path, permissions string) {
		if strings.ContainsAny(path, "\n\r\"\\") || strings.ContainsAny(permissions, "\n\r\"\\") {
			t.Skip() // not a path the YAML document below can carry as written
		}
		base, bin := t.TempDir(), t.TempDir()
		root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
		for _, d := range []string{root, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "file"), filepath.Join(root, "link-to-out")); err != nil {
			t.Fatal(err)
		}
		a := &rawagent.Agent{Kubeadm: fakeKubeadm(t, bin, 0), Root: root}
		_ = a.Run(context.Background(), filesData(path, permissions, "KEY"))
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Fatalf("path %q wrote outside the root: %v", path, entries)
		}
	})
}
