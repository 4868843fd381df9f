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

// Package fieldrules is the one table that decides, per bootstrap format,
// which KubeadmConfig spec fields are supported, restricted or rejected. The
// admission webhooks, `render --validate` and docs/reference/fields.md all read it.
package fieldrules

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/kubeadmpatch"
)

// Verdict is how a format treats a field.
type Verdict string

const (
	// Supported fields take effect.
	Supported Verdict = "supported"
	// Restricted fields take effect, but some values are rejected.
	Restricted Verdict = "restricted"
	// Rejected fields have no effect in the format and are refused when set.
	Rejected Verdict = "rejected"
)

// Treatment is a format's verdict on a field, with the reason shown in docs.
type Treatment struct {
	Verdict Verdict
	Note    string
}

// Rule is one row of the table. A format rejects a field where the field is
// set (IsSet, or SetIn for a field of list items), and restricts it where
// check finds a value it refuses.
type Rule struct {
	// Field is the path below spec, with [] for list items (e.g. files[].encoding).
	Field string
	// Description says what the field does, for the docs.
	Description string
	// Formats holds the non-supported treatments; a format not listed supports the field.
	Formats map[bootstrapv1.Format]Treatment
	// IsSet reports whether a spec sets the field, a whole field below spec.
	IsSet func(*bootstrapv1.KubeadmConfigSpec) bool
	// SetIn lists where a spec sets the field, a field of list items. Where
	// a format rejects the list as a whole, the items are not looked at.
	SetIn func(*bootstrapv1.KubeadmConfigSpec, *field.Path) []*field.Path
	// InPlace says that a change of the field can be applied to a running
	// machine, so the in-place update extension claims it; a change of any
	// other field replaces the machine. Only whole fields qualify: a path
	// without [].
	InPlace bool
	// check returns what a restricting format refuses, or what a rejecting
	// one refuses otherwise than at Field.
	check func(spec *bootstrapv1.KubeadmConfigSpec, src source, base *field.Path) field.ErrorList
}

// Treatment returns how format treats the rule's field.
func (r Rule) Treatment(format bootstrapv1.Format) Treatment {
	if t, ok := r.Formats[format]; ok {
		return t
	}
	return Treatment{Verdict: Supported}
}

// source is where a spec's format was chosen, as messages say it.
type source struct {
	format bootstrapv1.Format
	// annotation is the annotation that chose it, or "" for spec.format.
	annotation string
}

// said is the format and where it was chosen, for a message.
func (s source) said() string {
	if s.annotation == "" {
		return fmt.Sprintf("spec.format is %q", s.format)
	}
	return fmt.Sprintf("the format is %q (annotation %s)", s.format, s.annotation)
}

// notSupported is why a field is refused in the source's format, with
// upstream Cluster API's words where upstream has the rule.
func (s source) notSupported() string {
	switch {
	case s.format == bootstrapv1.Raw:
		return "not supported when " + s.said() + ": the raw format carries kubeadm configuration only"
	case s.annotation == "":
		return fmt.Sprintf("not supported when spec.format is set to: %q", s.format)
	}
	return "not supported when " + s.said()
}

// Notes shown in the docs.
const (
	rawNote            = "the raw format carries kubeadm configuration only; the agent that runs kubeadm manages the machine"
	rawFilesNote       = "only kubeadm's patches: files directly in initConfiguration.patches.directory or joinConfiguration.patches.directory, written whole (no append), as text; the agent writes them before kubeadm runs"
	ignitionNoBootNote = "Ignition has no stage that runs commands before boot; use preKubeadmCommands"
	parentNote         = "see its parent field"
)

// rawRejects is the treatment of a field only the raw format rejects.
var rawRejects = map[bootstrapv1.Format]Treatment{bootstrapv1.Raw: {Verdict: Rejected, Note: rawNote}}

// itemRejectedInIgnition is the treatment of a field of list items that
// Ignition rejects (raw rejects the list as a whole).
func itemRejectedInIgnition(note string) map[bootstrapv1.Format]Treatment {
	return map[bootstrapv1.Format]Treatment{
		bootstrapv1.Ignition: {Verdict: Rejected, Note: note},
		bootstrapv1.Raw:      {Verdict: Rejected, Note: parentNote},
	}
}

// Rules is the table, in documentation order.
var Rules = []Rule{
	{Field: "clusterConfiguration", Description: "kubeadm ClusterConfiguration (init)"},
	{Field: "clusterConfiguration.apiServer.extraArgs", Description: "flags of the API server", InPlace: true},
	{Field: "clusterConfiguration.apiServer.extraEnvs", Description: "environment of the API server", InPlace: true},
	{Field: "clusterConfiguration.apiServer.extraVolumes", Description: "host paths mounted into the API server", InPlace: true},
	{Field: "clusterConfiguration.controllerManager.extraArgs", Description: "flags of the controller manager", InPlace: true},
	{Field: "clusterConfiguration.controllerManager.extraEnvs", Description: "environment of the controller manager", InPlace: true},
	{Field: "clusterConfiguration.controllerManager.extraVolumes", Description: "host paths mounted into the controller manager", InPlace: true},
	{Field: "clusterConfiguration.scheduler.extraArgs", Description: "flags of the scheduler", InPlace: true},
	{Field: "clusterConfiguration.scheduler.extraEnvs", Description: "environment of the scheduler", InPlace: true},
	{Field: "clusterConfiguration.scheduler.extraVolumes", Description: "host paths mounted into the scheduler", InPlace: true},
	{Field: "clusterConfiguration.etcd.local.imageTag", Description: "the image tag of local etcd", InPlace: true},
	{Field: "clusterConfiguration.dns.imageTag", Description: "the image tag of CoreDNS, which KubeadmControlPlane updates in the cluster", InPlace: true},
	{Field: "initConfiguration", Description: "kubeadm InitConfiguration (init)"},
	{Field: "joinConfiguration", Description: "kubeadm JoinConfiguration (join)"},
	{Field: "joinConfiguration.nodeRegistration.kubeletExtraArgs", Description: "the kubelet's flags on a joining machine", InPlace: true},
	{
		Field: "files", Description: "files written before kubeadm runs", InPlace: true,
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "see files[].encoding"},
			bootstrapv1.Raw:      {Verdict: Restricted, Note: rawFilesNote},
		},
		check: rawFilesAreKubeadmPatches,
	},
	{
		Field: "files[].encoding", Description: "encoding of the file content",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "gzip and gzip+base64 are rejected (as upstream)"},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: "kubeadm patches are text, written as given"},
		},
		check: fileEncodings,
	},
	{
		Field: "diskSetup", Description: "partitions and file systems to create",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "see diskSetup.partitions[] and diskSetup.filesystems[]"},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: rawNote},
		},
		IsSet: func(s *bootstrapv1.KubeadmConfigSpec) bool { return s.DiskSetup.IsDefined() },
	},
	{
		Field: "diskSetup.partitions[].tableType", Description: "partition table type (mbr or gpt)",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "only gpt (as upstream)"},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: "see diskSetup"},
		},
		check: ignitionTableTypes,
	},
	{
		Field: "diskSetup.partitions[].diskLayout", Description: "partition sizes as percentages of the disk",
		Formats: itemRejectedInIgnition("Ignition sizes partitions in MiB, not in percentages of the disk"),
		SetIn:   itemsWhere(partitions, "diskLayout", func(p upstreambootstrapv1.Partition) bool { return len(p.DiskLayout) > 0 }),
	},
	{
		Field: "diskSetup.filesystems[].partition", Description: "partition of the device to format",
		Formats: itemRejectedInIgnition("not supported (as upstream); name the partition device instead"),
		SetIn:   itemsWhere(filesystems, "partition", func(fs upstreambootstrapv1.Filesystem) bool { return fs.Partition != "" }),
	},
	{
		Field: "diskSetup.filesystems[].replaceFS", Description: "file system to replace (Azure)",
		Formats: itemRejectedInIgnition("not supported (as upstream)"),
		SetIn:   itemsWhere(filesystems, "replaceFS", func(fs upstreambootstrapv1.Filesystem) bool { return fs.ReplaceFS != "" }),
	},
	{
		Field: "mounts", Description: "mount points to set up", Formats: rawRejects,
		IsSet: func(s *bootstrapv1.KubeadmConfigSpec) bool { return len(s.Mounts) > 0 },
	},
	{
		Field: "bootCommands", Description: "commands run early on every boot",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Rejected, Note: ignitionNoBootNote},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: rawNote},
		},
		IsSet: func(s *bootstrapv1.KubeadmConfigSpec) bool { return s.BootCommands != nil },
	},
	{
		Field: "preKubeadmCommands", Description: "commands run before kubeadm", Formats: rawRejects,
		IsSet: func(s *bootstrapv1.KubeadmConfigSpec) bool { return len(s.PreKubeadmCommands) > 0 },
	},
	{
		Field: "postKubeadmCommands", Description: "commands run after kubeadm", Formats: rawRejects,
		IsSet: func(s *bootstrapv1.KubeadmConfigSpec) bool { return len(s.PostKubeadmCommands) > 0 },
	},
	{
		Field: "users", Description: "OS users to create",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "see users[].inactive"},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: rawNote},
		},
		IsSet: func(s *bootstrapv1.KubeadmConfigSpec) bool { return len(s.Users) > 0 },
	},
	{
		Field: "users[].inactive", Description: "create the user inactive",
		Formats: itemRejectedInIgnition("Ignition cannot create inactive users (as upstream); false is accepted"),
		SetIn:   itemsWhere(users, "inactive", func(u upstreambootstrapv1.User) bool { return ptr.Deref(u.Inactive, false) }),
	},
	{
		Field: "ntp", Description: "time synchronisation (ignition: systemd-timesyncd)", Formats: rawRejects,
		IsSet: func(s *bootstrapv1.KubeadmConfigSpec) bool { return s.NTP.IsDefined() },
	},
	{
		Field: "verbosity", Description: "kubeadm's --v",
		Formats: map[bootstrapv1.Format]Treatment{bootstrapv1.Raw: {Verdict: Rejected, Note: "the agent chooses how to run kubeadm"}},
		IsSet:   func(s *bootstrapv1.KubeadmConfigSpec) bool { return s.Verbosity != nil },
	},
	{
		Field: "gzipUserData", Description: "deliver the data gzip-compressed, as its consumer decompresses it (beyond upstream; see Size limits)",
		Formats: map[bootstrapv1.Format]Treatment{bootstrapv1.Raw: {Verdict: Rejected, Note: "the agent reads the data secret as it is, not through size-limited user data; false is accepted"}},
		IsSet:   func(s *bootstrapv1.KubeadmConfigSpec) bool { return ptr.Deref(s.GzipUserData, false) },
	},
	{
		Field: "ignition", Description: "Ignition-only settings: containerLinuxConfig or butane (mutually exclusive)",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.CloudConfig: {Verdict: Rejected, Note: "needs format: ignition (as upstream, reported on spec.format)"},
			bootstrapv1.Raw:         {Verdict: Rejected, Note: rawNote},
		},
		check: ignitionSettings,
	},
}

// rawFilesAreKubeadmPatches refuses, under raw, a file that is not one of
// kubeadm's patches (directly in a patches directory) or is appended.
func rawFilesAreKubeadmPatches(s *bootstrapv1.KubeadmConfigSpec, src source, base *field.Path) field.ErrorList {
	if src.format != bootstrapv1.Raw {
		return nil // ignition: see files[].encoding
	}
	var errs field.ErrorList
	for i, f := range s.Files {
		p := base.Child("files").Index(i)
		if !kubeadmpatch.In(f.Path, s.InitConfiguration.Patches.Directory) && !kubeadmpatch.In(f.Path, s.JoinConfiguration.Patches.Directory) {
			errs = append(errs, field.Forbidden(p.Child("path"), src.notSupported()+
				"; a file is kubeadm's when it is a patch directly in initConfiguration.patches.directory or joinConfiguration.patches.directory"))
		}
		if ptr.Deref(f.Append, false) {
			errs = append(errs, field.Forbidden(p.Child("append"), src.notSupported()+"; a kubeadm patch is written whole"))
		}
	}
	return errs
}

// fileEncodings refuses gzip under Ignition (as upstream) and any encoding
// under raw (kubeadm patches are text).
func fileEncodings(s *bootstrapv1.KubeadmConfigSpec, src source, base *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range s.Files {
		switch {
		case src.format == bootstrapv1.Ignition && (f.Encoding == upstreambootstrapv1.Gzip || f.Encoding == upstreambootstrapv1.GzipBase64):
			errs = append(errs, field.Forbidden(base.Child("files").Index(i).Child("encoding"), src.notSupported()))
		case src.format == bootstrapv1.Raw && f.Encoding != "":
			errs = append(errs, field.Forbidden(base.Child("files").Index(i).Child("encoding"), src.notSupported()+"; kubeadm patches are text"))
		}
	}
	return errs
}

// ignitionTableTypes refuses, under Ignition, a partition table other than
// gpt (as upstream).
func ignitionTableTypes(s *bootstrapv1.KubeadmConfigSpec, src source, base *field.Path) field.ErrorList {
	if src.format != bootstrapv1.Ignition {
		return nil
	}
	var errs field.ErrorList
	for i, p := range s.DiskSetup.Partitions {
		if p.TableType != "" && p.TableType != "gpt" {
			errs = append(errs, field.Invalid(base.Child("diskSetup", "partitions").Index(i).Child("tableType"), p.TableType,
				fmt.Sprintf("only partition type %q is supported when spec.format is set to %q", "gpt", bootstrapv1.Ignition)))
		}
	}
	return errs
}

// ignitionSettings refuses spec.ignition outside the ignition format: under
// cloud-config at spec.format, as upstream does.
func ignitionSettings(s *bootstrapv1.KubeadmConfigSpec, src source, base *field.Path) field.ErrorList {
	if !s.Ignition.IsDefined() {
		return nil
	}
	if src.format == bootstrapv1.Raw {
		return field.ErrorList{field.Forbidden(base.Child("ignition"), src.notSupported())}
	}
	return field.ErrorList{field.Invalid(base.Child("format"), s.Format,
		fmt.Sprintf("must be set to %q if spec.ignition is set", bootstrapv1.Ignition))}
}

// list names a list in the spec and says where it lives.
type list[T any] struct {
	path  []string
	items func(*bootstrapv1.KubeadmConfigSpec) []T
}

var (
	partitions  = list[upstreambootstrapv1.Partition]{[]string{"diskSetup", "partitions"}, func(s *bootstrapv1.KubeadmConfigSpec) []upstreambootstrapv1.Partition { return s.DiskSetup.Partitions }}
	filesystems = list[upstreambootstrapv1.Filesystem]{[]string{"diskSetup", "filesystems"}, func(s *bootstrapv1.KubeadmConfigSpec) []upstreambootstrapv1.Filesystem {
		return s.DiskSetup.Filesystems
	}}
	users = list[upstreambootstrapv1.User]{[]string{"users"}, func(s *bootstrapv1.KubeadmConfigSpec) []upstreambootstrapv1.User { return s.Users }}
)

// itemsWhere returns the paths of child in every item of l for which set holds.
func itemsWhere[T any](l list[T], child string, set func(T) bool) func(*bootstrapv1.KubeadmConfigSpec, *field.Path) []*field.Path {
	return func(s *bootstrapv1.KubeadmConfigSpec, base *field.Path) []*field.Path {
		var out []*field.Path
		for i, item := range l.items(s) {
			if set(item) {
				out = append(out, base.Child(l.path[0], l.path[1:]...).Index(i).Child(child))
			}
		}
		return out
	}
}

// CheckFormatFields applies the table to spec for its format, the format
// spec.format says.
func CheckFormatFields(spec *bootstrapv1.KubeadmConfigSpec, base *field.Path) field.ErrorList {
	return checkFormatFields(spec, source{format: spec.EffectiveFormat()}, base)
}

func checkFormatFields(spec *bootstrapv1.KubeadmConfigSpec, src source, base *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, r := range Rules {
		t := r.Treatment(src.format)
		if t.Verdict == Supported {
			continue
		}
		if r.check != nil {
			errs = append(errs, r.check(spec, src, base)...)
		}
		if t.Verdict != Rejected {
			continue
		}
		if r.IsSet != nil && r.IsSet(spec) {
			errs = append(errs, field.Forbidden(base.Child(r.Field), src.notSupported()))
		}
		if r.SetIn != nil && t.Note != parentNote {
			for _, p := range r.SetIn(spec, base) {
				errs = append(errs, field.Forbidden(p, src.notSupported()))
			}
		}
	}
	return errs
}

// InPlaceFields are the fields, as paths below spec, whose changes a
// running machine can take; a change anywhere else replaces the machine.
func InPlaceFields() []string {
	var out []string
	for _, r := range Rules {
		if r.InPlace {
			out = append(out, r.Field)
		}
	}
	return out
}
