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

package rawagent

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
)

// TestSlashIsTheMachinesRoot: Root "/" is the machine's root, as "" is:
// files get the owners the data names there too.
func TestSlashIsTheMachinesRoot(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody on this machine: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	for _, root := range []string{"", "/", "//"} {
		a := &Agent{Root: root}
		tree, err := a.openRoot()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "owned")
		if err := a.writeFile(tree, rawv1.File{Path: path, Owner: "nobody", Permissions: "0600", Content: "x"}); err != nil {
			t.Fatalf("Root %q: %v", root, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := int(fi.Sys().(*syscall.Stat_t).Uid); got != uid {
			t.Errorf("Root %q: the file's owner is %d, want nobody (%d)", root, got, uid)
		}
	}
}
