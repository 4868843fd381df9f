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

package yamlerrors_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignition/butane"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignition/clc"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlerrors"
)

// fields are Butane / Container Linux Config fields (both spell these the
// same) as YAML paths to a leaf, with the nesting their parents need.
var fields = []string{
	"passwd.users[].name", "passwd.users[].password_hash", "passwd.users[].uid", "passwd.users[].ssh_authorized_keys[]",
	"passwd.users[].groups[]", "passwd.users[].home_dir", "passwd.users[].shell", "passwd.users[].no_create_home",
	"passwd.groups[].name", "passwd.groups[].gid",
	"storage.files[].path", "storage.files[].mode", "storage.files[].overwrite", "storage.files[].contents.inline",
	"storage.files[].contents.source", "storage.files[].user.name", "storage.files[].user.id", "storage.files[].filesystem",
	"storage.directories[].path", "storage.directories[].mode", "storage.links[].target", "storage.links[].hard",
	"storage.disks[].device", "storage.disks[].wipe_table", "storage.filesystems[].name", "storage.filesystems[].mount.format",
	"systemd.units[].name", "systemd.units[].enabled", "systemd.units[].contents", "systemd.units[].dropins[].contents",
	"networkd.units[].contents", "etcd.version", "flannel.version", "update.group", "locksmith.reboot_strategy",
}

// doc builds a document whose leaf at path is value (YAML flow syntax).
func doc(path, value string) string {
	var b strings.Builder
	parts := strings.Split(path, ".")
	for i, p := range parts {
		indent := strings.Repeat("  ", i)
		name, list := strings.CutSuffix(p, "[]")
		switch {
		case i == len(parts)-1 && list:
			fmt.Fprintf(&b, "%s%s:\n%s- %s\n", indent, name, indent, value)
		case i == len(parts)-1:
			fmt.Fprintf(&b, "%s%s: %s\n", indent, name, value)
		case list:
			fmt.Fprintf(&b, "%s%s:\n%s-\n", indent, name, indent)
		default:
			fmt.Fprintf(&b, "%s%s:\n", indent, name)
		}
	}
	// "- " items carry their first key on the next line, indented two more.
	return strings.ReplaceAll(b.String(), "-\n", "- _: 0\n")
}

// Every field gets a secret in each YAML shape, so that each translator hits
// type errors or warnings on it; no error or warning may carry the secret.
func TestTranslatorErrorsNeverQuoteTheDocument(t *testing.T) {
	failed := 0
	for i, f := range fields {
		for j, shape := range []string{"%s", "[%s]", "{%s: %s}", "{k: [%s]}"} {
			secret := fmt.Sprintf("SECRET-%d-%d-hunter2", i, j)
			value := strings.ReplaceAll(shape, "%s", secret)
			d := doc(f, value)
			for name, translate := range map[string]func(string, bool) ([]string, error){
				"butane": func(s string, strict bool) ([]string, error) { _, w, err := butane.Translate(s, strict); return w, err },
				"clc":    func(s string, strict bool) ([]string, error) { _, w, err := clc.Translate(s, strict); return w, err },
			} {
				for _, strict := range []bool{false, true} {
					warnings, err := translate(d, strict)
					msg := strings.Join(warnings, "\n")
					if err != nil {
						failed++
						msg += "\n" + err.Error()
					}
					if strings.Contains(msg, "SECRET-") || strings.Contains(msg, "hunter2") {
						t.Errorf("%s (strict %v) on %s = %s: the message quotes the value: %s", name, strict, f, value, msg)
					}
				}
			}
		}
	}
	if failed < len(fields) {
		t.Fatalf("only %d translations failed: the planted values did not reach the decoders", failed)
	}
}

func TestRedact(t *testing.T) {
	in := "line 4: cannot unmarshal !!str `hunter2` into int; line 9: cannot unmarshal !!map into string"
	if got := yamlerrors.Redact(in); strings.Contains(got, "hunter2") || !strings.Contains(got, "line 4") || !strings.Contains(got, yamlerrors.Redacted) {
		t.Fatalf("Redact(%q) = %q", in, got)
	}
}
