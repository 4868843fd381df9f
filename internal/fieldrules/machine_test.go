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

package fieldrules

import (
	"encoding/base64"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// TestWhatTheMachineWouldFailOnIsRefused: specs that used to be admitted
// and then failed in the renderer or on the machine are refused at
// admission, at the field, with what to write instead; what the machine can
// take in one format stays admitted there.
func TestWhatTheMachineWouldFailOnIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format bootstrapv1.Format
		edit   func(*bootstrapv1.KubeadmConfigSpec)
		field  string // "" means admitted
		says   string
	}{
		{"ephemeral0 under Ignition", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Mounts = []upstreambootstrapv1.MountPoints{{"ephemeral0", "/mnt"}}
		}, "spec.mounts[0][0]", "only cloud-init resolves"},
		{"ephemeral0 under cloud-config", bootstrapv1.CloudConfig, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Mounts = []upstreambootstrapv1.MountPoints{{"ephemeral0", "/mnt"}}
		}, "", ""},
		{"bare device name under Ignition", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Mounts = []upstreambootstrapv1.MountPoints{{"xvdb", "/data"}}
		}, "", ""},
		{"one-field mount", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Mounts = []upstreambootstrapv1.MountPoints{{"/dev/sdb"}}
		}, "spec.mounts[0]", "device and a mount point"},
		{"relative mount point", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Mounts = []upstreambootstrapv1.MountPoints{{"/dev/sdb", "data"}}
		}, "spec.mounts[0][1]", "absolute"},
		{"disk twice under Ignition", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.DiskSetup.Partitions = []upstreambootstrapv1.Partition{{Device: "/dev/sdb", Layout: ptr.To(true)}, {Device: "sdb", Layout: ptr.To(true)}}
		}, "spec.diskSetup.partitions[1].device", "Duplicate"},
		{"disk twice under cloud-config", bootstrapv1.CloudConfig, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.DiskSetup.Partitions = []upstreambootstrapv1.Partition{{Device: "/dev/sdb", Layout: ptr.To(true)}, {Device: "/dev/sdb", Layout: ptr.To(true)}}
		}, "spec.diskSetup.partitions[1].device", "Duplicate"},
		{"base64 that does not decode", bootstrapv1.CloudConfig, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Files = []upstreambootstrapv1.File{{Path: "/etc/x", Encoding: upstreambootstrapv1.Base64, Content: "SECRET not base64"}}
		}, "spec.files[0].content", "not valid base64"},
		{"gzip that is not gzip", bootstrapv1.CloudConfig, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Files = []upstreambootstrapv1.File{{Path: "/etc/x", Encoding: upstreambootstrapv1.GzipBase64, Content: base64.StdEncoding.EncodeToString([]byte("SECRET plain"))}}
		}, "spec.files[0].content", "not valid gzip"},
		{"base64 that does not decode, Ignition", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Files = []upstreambootstrapv1.File{{Path: "/etc/x", Encoding: upstreambootstrapv1.Base64, Content: "SECRET not base64"}}
		}, "spec.files[0].content", "not valid base64"},
		{"permissions not a mode", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Files = []upstreambootstrapv1.File{{Path: "/etc/x", Content: "x", Permissions: "0x644"}}
		}, "spec.files[0].permissions", "octal"},
		{"tmpfs under Ignition", bootstrapv1.Ignition, func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Mounts = []upstreambootstrapv1.MountPoints{{"tmpfs", "/scratch", "tmpfs", "size=1g"}, {"nfs.example:/export", "/nfs", "nfs"}}
		}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := joinSpec(tc.format)
			tc.edit(s)
			errs := Validate(s, gates(t, true, true), field.NewPath("spec"))
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), tc.says) {
				t.Fatalf("got %v, want one error at %s saying %q", errs.ToAggregate(), tc.field, tc.says)
			}
			if strings.Contains(errs[0].Error(), "SECRET") {
				t.Errorf("the error quotes the content: %v", errs[0])
			}
		})
	}
}

// TestButaneOverASpecFileIsAWarning: Butane writing where spec.files writes
// replaces the spec's file (Ignition merges the extra configuration last);
// admission says so instead of leaving it silent.
func TestButaneOverASpecFileIsAWarning(t *testing.T) {
	s := joinSpec(bootstrapv1.Ignition)
	s.Files = []upstreambootstrapv1.File{{Path: "/etc/both", Content: "x"}}
	s.Ignition.Butane.AdditionalConfig = "storage:\n  files:\n  - path: /etc/both\n    contents:\n      inline: y\n"
	errs, warnings := ValidateWithWarnings(s, gates(t, true, false), field.NewPath("spec"))
	if len(errs) > 0 || len(warnings) != 1 || !strings.Contains(warnings[0], "spec.files[0] writes too") || !strings.Contains(warnings[0], "replaces it") {
		t.Fatalf("errors %v, warnings %q: want one warning naming spec.files[0]", errs, warnings)
	}
}
