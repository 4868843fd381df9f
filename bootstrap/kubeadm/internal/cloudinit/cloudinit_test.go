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

package cloudinit_test

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/cloudinit"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
)

func buildConfig(t *testing.T, spec *bootstrapv1.KubeadmConfigSpec, action plan.Action) (*plan.Plan, *cloudinit.Config) {
	t.Helper()
	p, err := plan.Build(plantest.Input(spec, action))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloudinit.Build(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

func TestCommandsRunAroundKubeadmInOrder(t *testing.T) {
	_, c := buildConfig(t, plantest.Full(bootstrapv1.CloudConfig, plan.ActionInit), plan.ActionInit)
	want := []string{
		"swapoff -a",
		`echo 'pre with "quotes"' > /tmp/pre`,
		"kubeadm init --config /run/kubeadm/kubeadm.yaml --v 5 && echo success > /run/cluster-api/bootstrap-success.complete",
		"echo done > /tmp/post",
	}
	if strings.Join(c.RunCmd, "\n") != strings.Join(want, "\n") {
		t.Errorf("runcmd = %q", c.RunCmd)
	}
	if len(c.BootCmd) != 1 {
		t.Errorf("bootcmd = %q", c.BootCmd)
	}
}

func TestFilesOrderAndKubeadmConfig(t *testing.T) {
	p, c := buildConfig(t, plantest.Full(bootstrapv1.CloudConfig, plan.ActionJoinControlPlane), plan.ActionJoinControlPlane)
	var paths []string
	for _, f := range c.WriteFiles {
		paths = append(paths, f.Path)
	}
	if !strings.HasPrefix(paths[0], "/etc/kubernetes/pki/") {
		t.Errorf("certificates must come first: %v", paths)
	}
	n := len(c.WriteFiles)
	if paths[n-2] != plan.JoinConfigPath || c.WriteFiles[n-2].Content != p.Kubeadm.ConfigYAML() || c.WriteFiles[n-2].Permissions != "0640" {
		t.Errorf("kubeadm config not written as the last but one file: %v", paths)
	}
	if paths[n-1] != "/run/cluster-api/placeholder" {
		t.Errorf("sentinel directory placeholder missing: %v", paths)
	}
	for _, f := range c.WriteFiles {
		if f.Path == "/etc/gzip-base64.conf" && f.Encoding != "gzip+base64" {
			t.Errorf("encoding not passed through: %+v", f)
		}
		if f.Path == "/etc/append.conf" && !f.Append {
			t.Errorf("append lost: %+v", f)
		}
	}
}

func TestDiskSetupAndUsers(t *testing.T) {
	s := plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin)
	s.DiskSetup.Partitions = []upstreambootstrapv1.Partition{{Device: "/dev/sdc", DiskLayout: []upstreambootstrapv1.PartitionSpec{
		{Percentage: 50, PartitionType: "LinuxSwap"}, {Percentage: 25, PartitionType: "Fat32"}, {Percentage: 25},
	}}}
	s.DiskSetup.Filesystems = []upstreambootstrapv1.Filesystem{{Device: "/dev/sdc", Filesystem: "ext4", Partition: "2"}}
	s.Users = []upstreambootstrapv1.User{{Name: "gone", Inactive: ptr.To(true)}}
	_, c := buildConfig(t, s, plan.ActionJoin)
	layout := c.DiskSetup["/dev/sdc"].Layout.([]any)
	if layout[0].([]any)[1] != 82 || layout[1].([]any)[1] != "0c" || layout[2] != int32(25) {
		t.Errorf("partition types not mapped to cloud-init codes: %#v", layout)
	}
	if c.FSSetup[0].Partition != 2 {
		t.Errorf("partition number not numeric: %#v", c.FSSetup[0].Partition)
	}
	if c.Users[0].ExpireDate != cloudinit.ExpiredAccountDate {
		t.Errorf("inactive user not expired: %+v", c.Users[0])
	}
}

func TestRenderStartsWithJinjaHeader(t *testing.T) {
	p, err := plan.Build(plantest.Input(plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin), plan.ActionJoin))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cloudinit.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "## template: jinja\n#cloud-config\n") {
		t.Errorf("header: %q", out[:40])
	}
}
