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

package ignition_test

import (
	"path"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/vincent-petithory/dataurl"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/ignition"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
)

func build(t *testing.T, spec *bootstrapv1.KubeadmConfigSpec, action plan.Action) (*types.Config, error) {
	t.Helper()
	p, err := plan.Build(plantest.Input(spec, action))
	if err != nil {
		t.Fatal(err)
	}
	return ignition.Build(p)
}

func fileContent(t *testing.T, c *types.Config, path string) (types.File, string) {
	t.Helper()
	for _, f := range c.Storage.Files {
		if f.Path == path {
			src := f.Contents.Source
			if len(f.Append) > 0 {
				src = f.Append[0].Source
			}
			u, err := dataurl.DecodeString(*src)
			if err != nil {
				t.Fatal(err)
			}
			return f, string(u.Data)
		}
	}
	t.Fatalf("no file %s", path)
	return types.File{}, ""
}

func TestScriptRunsCommandsAroundKubeadm(t *testing.T) {
	c, err := build(t, plantest.Full(bootstrapv1.Ignition, plan.ActionJoin), plan.ActionJoin)
	if err != nil {
		t.Fatal(err)
	}
	_, script := fileContent(t, c, ignition.ScriptPath)
	order := []string{"set -e", "swapoff -a", "kubeadm join --config /etc/kubeadm.yml --v 5", "bootstrap-success.complete", "touch /etc/kubeadm.done", "rm -f /etc/kubeadm.yml", "echo done > /tmp/post"}
	last := -1
	for _, s := range order {
		i := strings.Index(script, s)
		if i <= last {
			t.Fatalf("%q out of order in:\n%s", s, script)
		}
		last = i
	}
	var unit string
	kubeletEnabled := false
	for _, u := range c.Systemd.Units {
		if u.Name == ignition.UnitName {
			unit = *u.Contents
		}
		if u.Name == "kubelet.service" && u.Enabled != nil && *u.Enabled && u.Contents == nil {
			kubeletEnabled = true
		}
	}
	if !kubeletEnabled {
		t.Errorf("kubelet.service is not enabled (without replacing the image's unit): %+v", c.Systemd.Units)
	}
	for _, want := range []string{"Type=oneshot", "ConditionPathExists=!/etc/kubeadm.done", "RequiresMountsFor=/var/lib/etcddisk", "WantedBy=multi-user.target", "After=network-online.target containerd.service"} {
		if !strings.Contains(unit, want) {
			t.Errorf("kubeadm unit lacks %q:\n%s", want, unit)
		}
	}
}

func TestFilesUsersAndTimesync(t *testing.T) {
	c, err := build(t, plantest.Full(bootstrapv1.Ignition, plan.ActionJoin), plan.ActionJoin)
	if err != nil {
		t.Fatal(err)
	}
	f, content := fileContent(t, c, "/etc/base64.conf")
	if content != "hello base64\n" || *f.Mode != 0o600 || !*f.Overwrite {
		t.Errorf("base64 file: %q mode %o", content, *f.Mode)
	}
	f, content = fileContent(t, c, "/etc/plain.conf")
	if *f.User.Name != "root" || *f.Group.Name != "root" || content != "plain text\n" {
		t.Errorf("owner not mapped: %+v", f.Node)
	}
	f, _ = fileContent(t, c, "/etc/append.conf")
	if len(f.Append) != 1 || f.Overwrite != nil {
		t.Errorf("append file must append, not overwrite: %+v", f)
	}
	_, sudo := fileContent(t, c, "/etc/sudoers.d/ops")
	if sudo != "ops ALL=(ALL) NOPASSWD:ALL\n" {
		t.Errorf("sudoers drop-in: %q", sudo)
	}
	_, ntp := fileContent(t, c, "/etc/systemd/timesyncd.conf.d/10-cluster-api.conf")
	if ntp != "[Time]\nNTP=0.pool.ntp.org time.example.com\n" {
		t.Errorf("timesyncd drop-in: %q", ntp)
	}
	ops, audit := c.Passwd.Users[0], c.Passwd.Users[1]
	if ops.PasswordHash == nil || len(ops.Groups) != 2 || *ops.HomeDir != "/home/ops" {
		t.Errorf("ops user: %+v", ops)
	}
	if audit.PasswordHash != nil || *audit.PrimaryGroup != "audit" {
		t.Errorf("locked user must not get a password: %+v", audit)
	}
}

func TestButaneMergesAndUserWins(t *testing.T) {
	s := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
	s.Files = []upstreambootstrapv1.File{{Path: "/etc/app.conf", Content: "from files"}}
	s.Ignition.Butane.AdditionalConfig = "storage:\n  files:\n  - path: /etc/app.conf\n    overwrite: true\n    contents:\n      inline: custom\n"
	c, err := build(t, s, plan.ActionJoin)
	if err != nil {
		t.Fatal(err)
	}
	if _, content := fileContent(t, c, "/etc/app.conf"); content != "custom" {
		t.Errorf("the Butane file must win the merge, got %q", content)
	}
}

// What the bootstrap needs cannot be merged away, even for a spec admitted
// before admission refused it.
func TestButaneCannotReplaceTheBootstrap(t *testing.T) {
	s := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
	s.Ignition.Butane.AdditionalConfig = "storage:\n  files:\n  - path: /etc/kubeadm.sh\n    overwrite: true\n    contents:\n      inline: custom\n"
	if _, err := build(t, s, plan.ActionJoin); err == nil || !strings.Contains(err.Error(), "/etc/kubeadm.sh") {
		t.Fatalf("replacing the kubeadm script: %v, want a refusal naming it", err)
	}
}

func TestButaneErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		doc    string
		strict bool
		want   string
	}{
		"not yaml":      {doc: "storage: [", want: "not valid YAML"},
		"wrong variant": {doc: "variant: fcos\nversion: 1.5.0\n", want: "only variant flatcar version 1.1.0"},
		"unknown key":   {doc: "storage:\n  filez: []\n", strict: true, want: "strict mode"},
		"invalid":       {doc: "storage:\n  files:\n  - path: relative\n", want: "absolute"},
	} {
		t.Run(name, func(t *testing.T) {
			s := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
			s.Ignition.Butane = bootstrapv1.ButaneConfig{AdditionalConfig: tc.doc, Strict: ptr.To(tc.strict)}
			_, err := build(t, s, plan.ActionJoin)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "spec.ignition.butane.additionalConfig") {
				t.Fatalf("want error with %q, got %v", tc.want, err)
			}
		})
	}
}

// TestRefusesWhatIgnitionCannotExpress: each is refused, naming its field,
// never dropped.
func TestRefusesWhatIgnitionCannotExpress(t *testing.T) {
	for name, mutate := range map[string]func(*bootstrapv1.KubeadmConfigSpec){
		"spec.bootCommands": func(s *bootstrapv1.KubeadmConfigSpec) { s.BootCommands = []string{"x"} },
		"spec.users[0].inactive": func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Users = []upstreambootstrapv1.User{{Name: "u", Inactive: ptr.To(true)}}
		},
		"spec.diskSetup.partitions[0].tableType": func(s *bootstrapv1.KubeadmConfigSpec) {
			s.DiskSetup.Partitions = []upstreambootstrapv1.Partition{{Device: "/dev/sdb", TableType: "mbr"}}
		},
		"spec.diskSetup.partitions[0].diskLayout": func(s *bootstrapv1.KubeadmConfigSpec) {
			s.DiskSetup.Partitions = []upstreambootstrapv1.Partition{{Device: "/dev/sdb", DiskLayout: []upstreambootstrapv1.PartitionSpec{{Percentage: 10}}}}
		},
		"spec.mounts[0]": func(s *bootstrapv1.KubeadmConfigSpec) { s.Mounts = []upstreambootstrapv1.MountPoints{{"/dev/sdb"}} },
	} {
		s := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
		mutate(s)
		// The rule table refuses most before a plan exists; the renderer
		// the rest (mounts as systemd reads them).
		p, err := plan.Build(plantest.Input(s, plan.ActionJoin))
		if err == nil {
			_, err = ignition.Build(p)
		}
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: want an error naming the field, got %v", name, err)
		}
	}
}

// sudo skips sudoers.d files whose names contain "." or end in "~"
// (sudoers(5), #includedir); every user's drop-in must be one sudo reads,
// one per user, and still grant that user.
func TestSudoersDropInsAreReadBySudo(t *testing.T) {
	names := []string{"ops", "jane.doe", "jane_doe", "backup~", "a.b.c", "x~~", "jane_doe_2"}
	spec := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
	for _, n := range names {
		spec.Users = append(spec.Users, upstreambootstrapv1.User{Name: n, Sudo: "ALL=(ALL) NOPASSWD:ALL"})
	}
	c, err := build(t, spec, plan.ActionJoin)
	if err != nil {
		t.Fatal(err)
	}
	granted := map[string]bool{}
	for _, f := range c.Storage.Files {
		dir, file := path.Split(f.Path)
		if dir != "/etc/sudoers.d/" {
			continue
		}
		if strings.Contains(file, ".") || strings.HasSuffix(file, "~") {
			t.Errorf("sudo skips %s", f.Path)
		}
		_, content := fileContent(t, c, f.Path)
		user, _, _ := strings.Cut(content, " ")
		if granted[user] {
			t.Errorf("user %s has two drop-ins", user)
		}
		granted[user] = true
	}
	for _, n := range names {
		if !granted[n] {
			t.Errorf("no sudoers drop-in grants %s", n)
		}
	}
}

// ntp.enabled: false is cloud-init skipping its ntp module: no time sync
// configuration at all, not a disabled time sync service.
func TestNTPDisabledConfiguresNothing(t *testing.T) {
	spec := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
	spec.NTP = upstreambootstrapv1.NTP{Enabled: ptr.To(false), Servers: []string{"time.example.com"}}
	c, err := build(t, spec, plan.ActionJoin)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Storage.Files {
		if strings.Contains(f.Path, "timesyncd") {
			t.Errorf("time sync configured: %s", f.Path)
		}
	}
	for _, u := range c.Systemd.Units {
		if strings.Contains(u.Name, "timesyncd") {
			t.Errorf("time sync unit touched: %+v", u)
		}
	}
}

// A password is usable in the Ignition output exactly when cloud-init would
// leave it unlocked for the same spec: cloud-init's lock_passwd defaults to
// true, so only lockPassword: false unlocks it.
func TestPasswordLockingAsCloudInit(t *testing.T) {
	for _, lock := range []*bool{nil, ptr.To(true), ptr.To(false)} {
		spec := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
		spec.Users = []upstreambootstrapv1.User{{Name: "ops", Passwd: "$6$salt$hash", LockPassword: lock}}
		c, err := build(t, spec, plan.ActionJoin)
		if err != nil {
			t.Fatal(err)
		}
		cloudInitUnlocked := lock != nil && !*lock // cloud-init: lock_passwd default true
		if got := c.Passwd.Users[0].PasswordHash != nil; got != cloudInitUnlocked {
			t.Errorf("lockPassword %v: Ignition sets a password hash: %v, cloud-init leaves the password usable: %v", ptr.Deref(lock, false), got, cloudInitUnlocked)
		}
	}
}

// Six-field mounts keep fstab's fsck pass: a non-zero pass makes the mount
// wait for systemd-fsck of its device, as systemd's fstab generator does.
func TestMountsKeepTheFsckPass(t *testing.T) {
	for _, tc := range []struct {
		mount []string
		fsck  string // "" = no check
	}{
		{[]string{"LABEL=data", "/data", "ext4", "defaults", "0", "2"}, `systemd-fsck@dev-disk-by\x2dlabel-data.service`},
		{[]string{"/dev/sdb1", "/srv", "xfs", "noatime", "0", "1"}, "systemd-fsck@dev-sdb1.service"},
		{[]string{"/dev/sdb1", "/srv", "xfs", "noatime", "0", "0"}, ""},
		{[]string{"/dev/sdb1", "/srv", "xfs"}, ""},
		{[]string{"tmpfs", "/scratch", "tmpfs", "size=1g", "0", "2"}, ""},
	} {
		spec := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
		spec.Mounts = []upstreambootstrapv1.MountPoints{tc.mount}
		c, err := build(t, spec, plan.ActionJoin)
		if err != nil {
			t.Fatal(err)
		}
		var contents string
		for _, u := range c.Systemd.Units {
			if strings.HasSuffix(u.Name, ".mount") {
				contents = *u.Contents
			}
		}
		unitSection, _, _ := strings.Cut(contents, "[Mount]")
		has := strings.Contains(unitSection, "Requires=systemd-fsck@")
		if tc.fsck == "" && has || tc.fsck != "" && !(strings.Contains(unitSection, "Requires="+tc.fsck) && strings.Contains(unitSection, "After="+tc.fsck)) {
			t.Errorf("mount %v: want fsck %q in [Unit]:\n%s", tc.mount, tc.fsck, contents)
		}
	}
	spec := plantest.Base(bootstrapv1.Ignition, plan.ActionJoin)
	spec.Mounts = []upstreambootstrapv1.MountPoints{{"/dev/sdb1", "/srv", "xfs", "defaults", "0", "two"}}
	if _, err := build(t, spec, plan.ActionJoin); err == nil || !strings.Contains(err.Error(), "spec.mounts[0][5]") {
		t.Errorf("a non-numeric pass: %v", err)
	}
}
