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
		"other filesystem": {doc: "storage:\n  filesystems:\n  - name: data\n    mount:\n      device: /dev/sdb\n      format: ext4\n  files:\n  - path: /x\n    filesystem: data\n    mode: 0644\n", want: "root filesystem"},
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
