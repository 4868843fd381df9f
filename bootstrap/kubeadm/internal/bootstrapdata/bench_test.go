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
	"fmt"
	"strings"
	"testing"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	upstreamcloudinit "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	upstreamignition "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/ignition"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/cloudinit"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/ignition"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/raw"
)

// The benchmarks render the same machines with this provider's renderers and
// with upstream Cluster API v1.14.2's exported pkg/cloudinit and pkg/ignition,
// in one run, so `benchstat` shows the ratio. Both sides start from prepared
// input (our plan; upstream's input struct built from the same plan) and end
// with the bootstrap data bytes. Upstream's ignition output is Ignition 2.3
// via the Container Linux Config transpiler, ours Ignition 3.4.

// Specs come in two sizes: small is a bare join or init; large is every
// feature the format has plus 20 files of 2 KiB and 5 users (a control-plane
// init of that kind carries ~70 KiB of data).
var sizes = []string{"small", "large"}

func benchSpec(format bootstrapv1.Format, action plan.Action, size string) *bootstrapv1.KubeadmConfigSpec {
	if size == "small" {
		return plantest.Base(format, action)
	}
	spec := plantest.Full(format, action)
	for i := range 20 {
		spec.Files = append(spec.Files, upstreambootstrapv1.File{
			Path: fmt.Sprintf("/etc/app/conf-%02d.yaml", i), Owner: "root:root", Permissions: "0644",
			Content: strings.Repeat(fmt.Sprintf("key-%02d: some configuration value\n", i), 64),
		})
	}
	for i := range 5 {
		spec.Users = append(spec.Users, upstreambootstrapv1.User{
			Name: fmt.Sprintf("ops%d", i), Groups: "wheel", Shell: "/bin/bash", Sudo: "ALL=(ALL) NOPASSWD:ALL",
			SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0ZW5kZWQgZm9yIGJlbmNobWFya3Mgb25seQ ops@example.com"},
		})
	}
	return spec
}

func benchPlan(b *testing.B, format bootstrapv1.Format, action plan.Action, size string) (*plan.Plan, plan.Input) {
	b.Helper()
	spec := benchSpec(format, action, size)
	spec.Ignition = bootstrapv1.IgnitionSpec{} // upstream cannot take Butane
	for i := range spec.Files {
		if spec.Files[i].Permissions == "" {
			spec.Files[i].Permissions = "0644" // upstream's ignition treats a missing mode as an error
		}
	}
	in := plantest.Input(spec, action)
	p, err := plan.Build(in)
	if err != nil {
		b.Fatal(err)
	}
	return p, in
}

// upstreamBase is upstream's shared input, from the plan.
func upstreamBase(p *plan.Plan) upstreamcloudinit.BaseUserData {
	base := upstreamcloudinit.BaseUserData{
		BootCommands: p.BootCommands, PreKubeadmCommands: p.PreKubeadmCommands, PostKubeadmCommands: p.PostKubeadmCommands,
		NTP: p.NTP, Mounts: p.Mounts, KubernetesVersion: p.KubernetesVersion,
	}
	if p.Kubeadm.Verbosity != nil {
		base.KubeadmVerbosity = "--v 5"
	}
	if len(p.Partitions)+len(p.Filesystems) > 0 {
		base.DiskSetup = &upstreambootstrapv1.DiskSetup{Partitions: p.Partitions, Filesystems: p.Filesystems}
	}
	for _, f := range p.Files {
		if f.Kind == plan.FileUser {
			appended := f.Append
			base.AdditionalFiles = append(base.AdditionalFiles, upstreambootstrapv1.File{
				Path: f.Path, Owner: f.Owner, Permissions: f.Permissions, Encoding: f.Encoding, Content: f.Content, Append: &appended,
			})
		}
	}
	for _, u := range p.Users {
		base.Users = append(base.Users, u.User)
	}
	return base
}

func upstreamCloudInit(_ *testing.B, p *plan.Plan, in plan.Input) ([]byte, error) {
	switch p.Action {
	case plan.ActionInit:
		return upstreamcloudinit.NewInitControlPlane(&upstreamcloudinit.ControlPlaneInput{
			BaseUserData: upstreamBase(p), Certificates: in.Certificates,
			ClusterConfiguration: p.Kubeadm.Documents[0], InitConfiguration: p.Kubeadm.Documents[1],
		})
	case plan.ActionJoinControlPlane:
		return upstreamcloudinit.NewJoinControlPlane(&upstreamcloudinit.ControlPlaneJoinInput{
			BaseUserData: upstreamBase(p), Certificates: in.Certificates, JoinConfiguration: p.Kubeadm.Documents[0],
		})
	default:
		return upstreamcloudinit.NewNode(&upstreamcloudinit.NodeInput{BaseUserData: upstreamBase(p), JoinConfiguration: p.Kubeadm.Documents[0]})
	}
}

func upstreamIgnition(_ *testing.B, p *plan.Plan, in plan.Input) ([]byte, error) {
	return upstreamIgnitionWithCLC(p, in)
}

// upstreamIgnitionWithCLC is upstream's Ignition renderer on the plan, with
// the plan's Container Linux Config.
func upstreamIgnitionWithCLC(p *plan.Plan, in plan.Input) ([]byte, error) {
	ign := &upstreambootstrapv1.IgnitionSpec{ContainerLinuxConfig: p.Ignition.ContainerLinuxConfig}
	var out []byte
	var err error
	switch p.Action {
	case plan.ActionInit:
		out, _, err = upstreamignition.NewInitControlPlane(&upstreamignition.ControlPlaneInput{Ignition: ign, ControlPlaneInput: &upstreamcloudinit.ControlPlaneInput{
			BaseUserData: upstreamBase(p), Certificates: in.Certificates,
			ClusterConfiguration: p.Kubeadm.Documents[0], InitConfiguration: p.Kubeadm.Documents[1],
		}})
	case plan.ActionJoinControlPlane:
		out, _, err = upstreamignition.NewJoinControlPlane(&upstreamignition.ControlPlaneJoinInput{Ignition: ign, ControlPlaneJoinInput: &upstreamcloudinit.ControlPlaneJoinInput{
			BaseUserData: upstreamBase(p), Certificates: in.Certificates, JoinConfiguration: p.Kubeadm.Documents[0],
		}})
	default:
		out, _, err = upstreamignition.NewNode(&upstreamignition.NodeInput{Ignition: ign, NodeInput: &upstreamcloudinit.NodeInput{
			BaseUserData: upstreamBase(p), JoinConfiguration: p.Kubeadm.Documents[0],
		}})
	}
	return out, err
}

// runRender benchmarks one renderer and reports the size of what it writes.
func runRender(b *testing.B, render func() ([]byte, error)) {
	out, err := render()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := render(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(out)), "out-bytes/op")
}

func benchmarkSideBySide(b *testing.B, format bootstrapv1.Format, ours func(*plan.Plan) ([]byte, error), upstream func(*testing.B, *plan.Plan, plan.Input) ([]byte, error)) {
	for _, size := range sizes {
		for _, action := range plan.Actions {
			p, in := benchPlan(b, format, action, size)
			b.Run("impl=ours/size="+size+"/action="+string(action), func(b *testing.B) {
				runRender(b, func() ([]byte, error) { return ours(p) })
			})
			b.Run("impl=upstream/size="+size+"/action="+string(action), func(b *testing.B) {
				runRender(b, func() ([]byte, error) { return upstream(b, p, in) })
			})
		}
	}
}

func BenchmarkCloudInit(b *testing.B) {
	benchmarkSideBySide(b, bootstrapv1.CloudConfig, cloudinit.Render, upstreamCloudInit)
}

func BenchmarkIgnition(b *testing.B) {
	// Upstream's ignition renderer rejects what it cannot express (e.g. mbr
	// tables), so both sides get the ignition feature set.
	benchmarkSideBySide(b, bootstrapv1.Ignition, ignition.Render, upstreamIgnition)
}

// BenchmarkIgnitionButane has no upstream counterpart (upstream takes no
// Butane): the large spec with its Butane merged in, and the merged config
// parsed with Ignition's own parser.
func BenchmarkIgnitionButane(b *testing.B) {
	for _, action := range plan.Actions {
		spec := benchSpec(bootstrapv1.Ignition, action, "large")
		p, err := plan.Build(plantest.Input(spec, action))
		if err != nil {
			b.Fatal(err)
		}
		b.Run("impl=ours/size=large/action="+string(action), func(b *testing.B) {
			runRender(b, func() ([]byte, error) { return ignition.Render(p) })
		})
	}
}

// BenchmarkRaw has no upstream counterpart; its yardstick is impl=copy, the
// cost of copying its output (value and files) into new buffers.
func BenchmarkRaw(b *testing.B) {
	for _, action := range plan.Actions {
		p, err := plan.Build(plantest.Input(plantest.Base(bootstrapv1.Raw, action), action))
		if err != nil {
			b.Fatal(err)
		}
		out, err := raw.Render(p)
		if err != nil {
			b.Fatal(err)
		}
		size := float64(len(out.Value) + len(out.Files))
		b.Run("impl=ours/action="+string(action), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := raw.Render(p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(size, "out-bytes/op")
		})
		b.Run("impl=copy/action="+string(action), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = append([]byte(nil), out.Value...)
				if out.Files != nil {
					sink = append([]byte(nil), out.Files...)
				}
			}
			b.ReportMetric(size, "out-bytes/op")
		})
	}
}

// sink keeps the copies of BenchmarkRaw's yardstick from being optimised away.
var sink []byte

// BenchmarkPlan measures computing the format-neutral plan (kubeadm
// documents, discovery, certificates, files), the part shared by all formats.
func BenchmarkPlan(b *testing.B) {
	for _, size := range sizes {
		for _, action := range plan.Actions {
			in := plantest.Input(benchSpec(bootstrapv1.CloudConfig, action, size), action)
			b.Run("size="+size+"/action="+string(action), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := plan.Build(in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
