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

package clc

import (
	"strings"
	"testing"
)

func TestTranslate(t *testing.T) {
	cfg, _, err := Translate("storage:\n  files:\n  - path: /etc/x\n    filesystem: root\n    mode: 0600\n    contents:\n      inline: hi\npasswd:\n  users:\n  - name: core\n    ssh_authorized_keys: [\"ssh-ed25519 AAAA\"]\n", true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ignition.Version != "3.4.0" || len(cfg.Storage.Files) != 1 || cfg.Storage.Files[0].Path != "/etc/x" || *cfg.Storage.Files[0].Mode != 0o600 {
		t.Fatalf("unexpected translation: %+v", cfg.Storage.Files)
	}
	if len(cfg.Passwd.Users) != 1 || cfg.Passwd.Users[0].Name != "core" {
		t.Fatalf("users lost: %+v", cfg.Passwd)
	}
}

func TestTranslateErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		doc    string
		strict bool
		want   string
	}{
		"not yaml":         {doc: "storage: [", want: "not a valid Container Linux Config"},
		"warning strict":   {doc: "storage:\n  files:\n  - path: /etc/x\n    filesystem: root\n    contents:\n      inline: hi\n", strict: true, want: "mode unspecified"},
		"other filesystem": {doc: "storage:\n  filesystems:\n  - name: data\n    mount:\n      device: /dev/sdb\n      format: ext4\n  files:\n  - path: /x\n    filesystem: data\n    mode: 0644\n", want: "storage.files[0].filesystem: only the root filesystem"},
		// Upstream's Flatcar templates write grub.cfg to the OEM partition; it
		// must not land at /grub.cfg on the root filesystem.
		"oem files": {doc: "storage:\n  files:\n  - path: /grub.cfg\n    filesystem: oem\n    mode: 0644\n    contents:\n      inline: x\n", want: "storage.files[0].filesystem: only the root filesystem"},
		"oem dir":   {doc: "storage:\n  directories:\n  - path: /d\n    filesystem: oem\n", want: "storage.directories[0].filesystem"},
		"swap":      {doc: "storage:\n  filesystems:\n  - name: swap\n    mount:\n      device: /dev/sdc\n      format: swap\n", want: "storage.filesystems[0]: declaring filesystems"},
		"networkd":  {doc: "networkd:\n  units:\n  - name: 00-eth0.network\n    contents: |\n      [Match]\n      Name=eth0\n", want: "networkd.units: not supported by Ignition 3"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Translate(tc.doc, tc.strict)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
	if _, _, err := Translate("storage:\n  files:\n  - path: /etc/x\n    filesystem: root\n    contents:\n      inline: hi\n", false); err != nil {
		t.Fatalf("warnings must pass without strict: %v", err)
	}
}
