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

package bootstrapdata_test

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstrapdata"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
)

// riskyEdits are what users write that a renderer or the machine's consumer
// may fail on: cloud-init's device names and aliases, short and repeated
// mounts and devices, content that does not decode, modes that are not
// modes, Butane writing where spec.files writes.
var riskyEdits = []struct {
	name string
	edit func(*bootstrapv1.KubeadmConfigSpec)
}{
	{"mount ephemeral0", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Mounts = append(s.Mounts, upstreambootstrapv1.MountPoints{"ephemeral0", "/mnt/ephemeral"})
	}},
	{"mount a bare device name", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Mounts = append(s.Mounts, upstreambootstrapv1.MountPoints{"xvdb", "/data", "ext4", "defaults", "0", "2"})
	}},
	{"mount of one field", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Mounts = append(s.Mounts, upstreambootstrapv1.MountPoints{"/dev/sdb"})
	}},
	{"mount point twice", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Mounts = append(s.Mounts, upstreambootstrapv1.MountPoints{"/dev/sdc", "/var/x"}, upstreambootstrapv1.MountPoints{"/dev/sdd", "/var/x/"})
	}},
	{"fsck pass not a number", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Mounts = append(s.Mounts, upstreambootstrapv1.MountPoints{"/dev/sde", "/e", "ext4", "defaults", "0", "two"})
	}},
	{"disk device twice", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.DiskSetup.Partitions = append(s.DiskSetup.Partitions,
			upstreambootstrapv1.Partition{Device: "/dev/sdf", Layout: ptr.To(true)}, upstreambootstrapv1.Partition{Device: "/dev/sdf", Layout: ptr.To(true)})
	}},
	{"disk named by alias", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.DiskSetup.Partitions = append(s.DiskSetup.Partitions, upstreambootstrapv1.Partition{Device: "ephemeral1", Layout: ptr.To(true)})
	}},
	{"file system on a bare device name", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.DiskSetup.Filesystems = append(s.DiskSetup.Filesystems, upstreambootstrapv1.Filesystem{Device: "nvme1n1", Filesystem: "ext4", Label: "scratch"})
		s.Mounts = append(s.Mounts, upstreambootstrapv1.MountPoints{"scratch", "/scratch"})
	}},
	{"base64 that does not decode", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/b64", Encoding: upstreambootstrapv1.Base64, Content: "not base64!"})
	}},
	{"base64 that decodes", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/b64ok", Encoding: upstreambootstrapv1.Base64, Content: base64.StdEncoding.EncodeToString([]byte("ok\n"))})
	}},
	{"gzip that is not gzip", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/gz", Encoding: upstreambootstrapv1.GzipBase64, Content: base64.StdEncoding.EncodeToString([]byte("plain"))})
	}},
	{"permissions not octal", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/perm", Content: "x", Permissions: "rw-r--r--"})
	}},
	{"permissions too large", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/perm2", Content: "x", Permissions: "17777"})
	}},
	{"Butane writes a spec file's path", func(s *bootstrapv1.KubeadmConfigSpec) {
		s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/both", Content: "spec"})
		s.Ignition.Butane.AdditionalConfig = "storage:\n  files:\n  - path: /etc/both\n    contents:\n      inline: butane\n"
	}},
}

// admittedRenders reports how a spec fared: refused at admission, or
// admitted and rendered; an admitted spec that a renderer refuses fails t.
func admittedRenders(t *testing.T, spec *bootstrapv1.KubeadmConfigSpec, action plan.Action, what string) (admitted bool) {
	t.Helper()
	if errs := fieldrules.Validate(spec, allGatesOn(t), field.NewPath("spec")); len(errs) > 0 {
		return false
	}
	p, err := plan.Build(plantest.Input(spec, action))
	if err != nil {
		t.Fatalf("%s: admitted, but the plan fails: %v", what, err)
	}
	if _, err := bootstrapdata.Render(p); err != nil {
		t.Fatalf("%s: admitted, but the %s renderer refuses it: %v", what, spec.EffectiveFormat(), err)
	}
	return true
}

// TestAdmittedSpecsRender: admission and the renderers decide in one place,
// so every spec admission lets through renders, in every format: generated
// specs with one to three risky edits each, every edit in every format and
// action, many of them refused and many admitted.
func TestAdmittedSpecsRender(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 2026))
	admitted, refused := 0, 0
	for _, format := range bootstrapv1.Formats {
		for _, action := range plan.Actions {
			for i := range 40 {
				spec := plantest.Random(r, format, action)
				var names []string
				for range 1 + r.IntN(3) {
					e := riskyEdits[r.IntN(len(riskyEdits))]
					e.edit(spec)
					names = append(names, e.name)
				}
				if admittedRenders(t, spec, action, fmt.Sprintf("%s %s #%d %v", format, action, i, names)) {
					admitted++
				} else {
					refused++
				}
			}
			for _, e := range riskyEdits {
				spec := plantest.Base(format, action)
				e.edit(spec)
				if admittedRenders(t, spec, action, fmt.Sprintf("%s %s %s", format, action, e.name)) {
					admitted++
				} else {
					refused++
				}
			}
		}
	}
	t.Logf("%d admitted and rendered, %d refused at admission", admitted, refused)
	if admitted < 50 || refused < 50 {
		t.Fatalf("%d admitted, %d refused: the edits no longer exercise both sides", admitted, refused)
	}
}
