package bootstrapdata_test

import (
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

func benchPlan(b *testing.B, format bootstrapv1.Format, action plan.Action) *plan.Plan {
	b.Helper()
	spec := plantest.Full(format, action)
	spec.Ignition = bootstrapv1.IgnitionSpec{} // upstream cannot take Butane
	for i := range spec.Files {
		if spec.Files[i].Permissions == "" {
			spec.Files[i].Permissions = "0644" // upstream's ignition treats a missing mode as an error
		}
	}
	p, err := plan.Build(plantest.Input(spec, action))
	if err != nil {
		b.Fatal(err)
	}
	return p
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
			append_ := f.Append
			base.AdditionalFiles = append(base.AdditionalFiles, upstreambootstrapv1.File{
				Path: f.Path, Owner: f.Owner, Permissions: f.Permissions, Encoding: f.Encoding, Content: f.Content, Append: &append_,
			})
		}
	}
	for _, u := range p.Users {
		base.Users = append(base.Users, u.User)
	}
	return base
}

func upstreamCloudInit(b *testing.B, p *plan.Plan, in plan.Input) ([]byte, error) {
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

func upstreamIgnition(b *testing.B, p *plan.Plan, in plan.Input) ([]byte, error) {
	ign := &upstreambootstrapv1.IgnitionSpec{}
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

func benchmarkSideBySide(b *testing.B, format bootstrapv1.Format, ours func(*plan.Plan) ([]byte, error), upstream func(*testing.B, *plan.Plan, plan.Input) ([]byte, error)) {
	for _, action := range plan.Actions {
		p := benchPlan(b, format, action)
		in := plantest.Input(plantest.Full(format, action), action)
		b.Run("impl=ours/action="+string(action), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ours(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("impl=upstream/action="+string(action), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := upstream(b, p, in); err != nil {
					b.Fatal(err)
				}
			}
		})
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

// BenchmarkRaw has no upstream counterpart; its yardstick is impl=copy, the
// cost of copying its output (value and files) into new buffers.
func BenchmarkRaw(b *testing.B) {
	for _, action := range plan.Actions {
		p, err := plan.Build(plantest.Input(plantest.Base(bootstrapv1.Raw, action), action))
		if err != nil {
			b.Fatal(err)
		}
		b.Run("impl=ours/action="+string(action), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := raw.Render(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		out, err := raw.Render(p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("impl=copy/action="+string(action), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = append([]byte(nil), out.Value...)
				if out.Files != nil {
					sink = append([]byte(nil), out.Files...)
				}
			}
		})
	}
}

// sink keeps the copies of BenchmarkRaw's yardstick from being optimised away.
var sink []byte

// BenchmarkPlan measures computing the format-neutral plan (kubeadm
// documents, discovery, certificates, files), the part shared by all formats.
func BenchmarkPlan(b *testing.B) {
	for _, action := range plan.Actions {
		in := plantest.Input(plantest.Full(bootstrapv1.CloudConfig, action), action)
		b.Run("action="+string(action), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := plan.Build(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
