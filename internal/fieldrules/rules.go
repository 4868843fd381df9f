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
// admission webhooks, `render --validate` and docs/formats.md all read it.
package fieldrules

import (
	"fmt"
	"strings"

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

// Rule is one row of the table.
type Rule struct {
	// Field is the path below spec, with [] for list items (e.g. files[].encoding).
	Field string
	// Description says what the field does, for the docs.
	Description string
	// Formats holds the non-supported treatments; a format not listed supports the field.
	Formats map[bootstrapv1.Format]Treatment
	// violations returns the offending occurrences of the field for a format
	// whose treatment is not Supported.
	violations func(spec *bootstrapv1.KubeadmConfigSpec, format bootstrapv1.Format, base *field.Path) field.ErrorList
	// Example sets the field to a value the restricting formats refuse;
	// ExamplePath is where that error is reported, relative to spec, and
	// ExamplePaths overrides it per format (a restricted field reports the
	// sub-field at fault). Tests use them to prove every verdict.
	Example      func(spec *bootstrapv1.KubeadmConfigSpec)
	ExamplePath  string
	ExamplePaths map[bootstrapv1.Format]string
}

// ReportedAt is where validation reports the Example's problem in format.
func (r Rule) ReportedAt(format bootstrapv1.Format) string {
	if p, ok := r.ExamplePaths[format]; ok {
		return p
	}
	return r.ExamplePath
}

// Treatment returns how format treats the rule's field.
func (r Rule) Treatment(format bootstrapv1.Format) Treatment {
	if t, ok := r.Formats[format]; ok {
		return t
	}
	return Treatment{Verdict: Supported}
}

// Messages, kept equal to upstream Cluster API's where upstream has the rule.
var (
	rawOnlyKubeadm     = fmt.Sprintf("not supported when spec.format is %q: the raw format carries kubeadm configuration only", bootstrapv1.Raw)
	cannotUseIgnition  = fmt.Sprintf("not supported when spec.format is set to: %q", bootstrapv1.Ignition)
	rawNote            = "the raw format carries kubeadm configuration only; the agent that runs kubeadm manages the machine"
	rawFilesNote       = "only kubeadm's patches: files directly in initConfiguration.patches.directory or joinConfiguration.patches.directory, written whole (no append), as text; the agent writes them before kubeadm runs"
	ignitionNoBootNote = "Ignition has no stage that runs commands before boot; use preKubeadmCommands"
)

// rawRejected is the treatment of a field only the raw format rejects.
func rawRejected() map[bootstrapv1.Format]Treatment {
	return map[bootstrapv1.Format]Treatment{bootstrapv1.Raw: {Verdict: Rejected, Note: rawNote}}
}

// whole builds a rule for a field rejected as a whole where it is set.
func whole(name, description string, isSet func(*bootstrapv1.KubeadmConfigSpec) bool, formats map[bootstrapv1.Format]Treatment, example func(*bootstrapv1.KubeadmConfigSpec)) Rule {
	return Rule{
		Field: name, Description: description, Formats: formats, Example: example, ExamplePath: name,
		violations: func(spec *bootstrapv1.KubeadmConfigSpec, format bootstrapv1.Format, base *field.Path) field.ErrorList {
			if formats[format].Verdict != Rejected || !isSet(spec) {
				return nil // restricted wholes are checked by their sub-field rules
			}
			msg := rawOnlyKubeadm
			if format == bootstrapv1.Ignition {
				msg = cannotUseIgnition
			}
			return field.ErrorList{field.Forbidden(base.Child(name), msg)}
		},
	}
}

// gzippedPatch sets a kubeadm patch with a gzip encoding ("spec: {}").
func gzippedPatch(s *bootstrapv1.KubeadmConfigSpec) {
	s.InitConfiguration.Patches.Directory = "/etc/kubeadm/patches"
	s.Files = []upstreambootstrapv1.File{{Path: "/etc/kubeadm/patches/etcd.yaml", Content: "H4sIAAAAAAAC/ysuSE22Uqiu5QIAlQLavQkAAAA=", Encoding: upstreambootstrapv1.GzipBase64}}
}

// Rules is the table, in documentation order.
var Rules = []Rule{
	{Field: "clusterConfiguration", Description: "kubeadm ClusterConfiguration (init)"},
	{Field: "initConfiguration", Description: "kubeadm InitConfiguration (init)"},
	{Field: "joinConfiguration", Description: "kubeadm JoinConfiguration (join)"},
	{
		Field: "files", Description: "files written before kubeadm runs",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "see files[].encoding"},
			bootstrapv1.Raw:      {Verdict: Restricted, Note: rawFilesNote},
		},
		violations: func(s *bootstrapv1.KubeadmConfigSpec, format bootstrapv1.Format, base *field.Path) field.ErrorList {
			if format != bootstrapv1.Raw {
				return nil // ignition: see files[].encoding
			}
			var errs field.ErrorList
			for i, f := range s.Files {
				p := base.Child("files").Index(i)
				if !kubeadmpatch.In(f.Path, s.InitConfiguration.Patches.Directory) && !kubeadmpatch.In(f.Path, s.JoinConfiguration.Patches.Directory) {
					errs = append(errs, field.Forbidden(p.Child("path"), rawOnlyKubeadm+
						"; a file is kubeadm's when it is a patch directly in initConfiguration.patches.directory or joinConfiguration.patches.directory"))
				}
				if ptr.Deref(f.Append, false) {
					errs = append(errs, field.Forbidden(p.Child("append"), rawOnlyKubeadm+"; a kubeadm patch is written whole"))
				}
			}
			return errs
		},
		// Both restrict the encoding of a kubeadm patch; which paths raw
		// takes is proven by the rule's own tests.
		Example:     gzippedPatch,
		ExamplePath: "files[0].encoding",
	},
	{
		Field: "files[].encoding", Description: "encoding of the file content",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "gzip and gzip+base64 are rejected (as upstream)"},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: "kubeadm patches are text, written as given"},
		},
		violations: func(s *bootstrapv1.KubeadmConfigSpec, format bootstrapv1.Format, base *field.Path) field.ErrorList {
			var errs field.ErrorList
			for i, f := range s.Files {
				switch {
				case format == bootstrapv1.Ignition && (f.Encoding == upstreambootstrapv1.Gzip || f.Encoding == upstreambootstrapv1.GzipBase64):
					errs = append(errs, field.Forbidden(base.Child("files").Index(i).Child("encoding"), cannotUseIgnition))
				case format == bootstrapv1.Raw && f.Encoding != "":
					errs = append(errs, field.Forbidden(base.Child("files").Index(i).Child("encoding"), rawOnlyKubeadm+"; kubeadm patches are text"))
				}
			}
			return errs
		},
		Example:     gzippedPatch,
		ExamplePath: "files[0].encoding",
	},
	whole("diskSetup", "partitions and file systems to create",
		func(s *bootstrapv1.KubeadmConfigSpec) bool { return s.DiskSetup.IsDefined() },
		map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "see diskSetup.partitions[] and diskSetup.filesystems[]"},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: rawNote},
		},
		func(s *bootstrapv1.KubeadmConfigSpec) {
			s.DiskSetup = upstreambootstrapv1.DiskSetup{Partitions: []upstreambootstrapv1.Partition{{Device: "/dev/sdb", Layout: ptr.To(true), TableType: "mbr"}}}
		}).reportedIn(bootstrapv1.Ignition, "diskSetup.partitions[0].tableType"),
	{
		Field: "diskSetup.partitions[].tableType", Description: "partition table type (mbr or gpt)",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "only gpt (as upstream)"},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: "see diskSetup"},
		},
		violations: func(s *bootstrapv1.KubeadmConfigSpec, format bootstrapv1.Format, base *field.Path) field.ErrorList {
			var errs field.ErrorList
			if format != bootstrapv1.Ignition {
				return nil
			}
			for i, p := range s.DiskSetup.Partitions {
				if p.TableType != "" && p.TableType != "gpt" {
					errs = append(errs, field.Invalid(base.Child("diskSetup", "partitions").Index(i).Child("tableType"), p.TableType,
						fmt.Sprintf("only partition type %q is supported when spec.format is set to %q", "gpt", bootstrapv1.Ignition)))
				}
			}
			return errs
		},
		Example: func(s *bootstrapv1.KubeadmConfigSpec) {
			s.DiskSetup = upstreambootstrapv1.DiskSetup{Partitions: []upstreambootstrapv1.Partition{{Device: "/dev/sdb", Layout: ptr.To(true), TableType: "mbr"}}}
		},
		ExamplePath:  "diskSetup.partitions[0].tableType",
		ExamplePaths: map[bootstrapv1.Format]string{bootstrapv1.Raw: "diskSetup"},
	},
	perItemRejectedInIgnition("diskSetup.partitions[].diskLayout", "partition sizes as percentages of the disk",
		"Ignition sizes partitions in MiB, not in percentages of the disk",
		itemsWhere(partitions, "diskLayout", func(p upstreambootstrapv1.Partition) bool { return len(p.DiskLayout) > 0 }),
		func(s *bootstrapv1.KubeadmConfigSpec) {
			s.DiskSetup = upstreambootstrapv1.DiskSetup{Partitions: []upstreambootstrapv1.Partition{{Device: "/dev/sdb", DiskLayout: []upstreambootstrapv1.PartitionSpec{{Percentage: 50}}}}}
		}, "diskSetup.partitions[0].diskLayout"),
	perItemRejectedInIgnition("diskSetup.filesystems[].partition", "partition of the device to format",
		"not supported (as upstream); name the partition device instead",
		itemsWhere(filesystems, "partition", func(fs upstreambootstrapv1.Filesystem) bool { return fs.Partition != "" }),
		func(s *bootstrapv1.KubeadmConfigSpec) {
			s.DiskSetup = upstreambootstrapv1.DiskSetup{Filesystems: []upstreambootstrapv1.Filesystem{{Device: "/dev/sdb", Filesystem: "ext4", Partition: "auto"}}}
		}, "diskSetup.filesystems[0].partition"),
	perItemRejectedInIgnition("diskSetup.filesystems[].replaceFS", "file system to replace (Azure)",
		"not supported (as upstream)",
		itemsWhere(filesystems, "replaceFS", func(fs upstreambootstrapv1.Filesystem) bool { return fs.ReplaceFS != "" }),
		func(s *bootstrapv1.KubeadmConfigSpec) {
			s.DiskSetup = upstreambootstrapv1.DiskSetup{Filesystems: []upstreambootstrapv1.Filesystem{{Device: "/dev/sdb", Filesystem: "ntfs", ReplaceFS: "ntfs"}}}
		}, "diskSetup.filesystems[0].replaceFS"),
	whole("mounts", "mount points to set up",
		func(s *bootstrapv1.KubeadmConfigSpec) bool { return len(s.Mounts) > 0 }, rawRejected(),
		func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Mounts = []upstreambootstrapv1.MountPoints{{"LABEL=data", "/data"}}
		}),
	whole("bootCommands", "commands run early on every boot",
		func(s *bootstrapv1.KubeadmConfigSpec) bool { return s.BootCommands != nil },
		map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Rejected, Note: ignitionNoBootNote},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: rawNote},
		},
		func(s *bootstrapv1.KubeadmConfigSpec) { s.BootCommands = []string{"echo boot"} }),
	whole("preKubeadmCommands", "commands run before kubeadm",
		func(s *bootstrapv1.KubeadmConfigSpec) bool { return len(s.PreKubeadmCommands) > 0 }, rawRejected(),
		func(s *bootstrapv1.KubeadmConfigSpec) { s.PreKubeadmCommands = []string{"echo pre"} }),
	whole("postKubeadmCommands", "commands run after kubeadm",
		func(s *bootstrapv1.KubeadmConfigSpec) bool { return len(s.PostKubeadmCommands) > 0 }, rawRejected(),
		func(s *bootstrapv1.KubeadmConfigSpec) { s.PostKubeadmCommands = []string{"echo post"} }),
	whole("users", "OS users to create",
		func(s *bootstrapv1.KubeadmConfigSpec) bool { return len(s.Users) > 0 },
		map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Restricted, Note: "see users[].inactive"},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: rawNote},
		},
		func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Users = []upstreambootstrapv1.User{{Name: "ops", Inactive: ptr.To(true)}}
		}).reportedIn(bootstrapv1.Ignition, "users[0].inactive"),
	perItemRejectedInIgnition("users[].inactive", "create the user inactive",
		"Ignition cannot create inactive users (as upstream); false is accepted",
		itemsWhere(users, "inactive", func(u upstreambootstrapv1.User) bool { return ptr.Deref(u.Inactive, false) }),
		func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Users = []upstreambootstrapv1.User{{Name: "ops", Inactive: ptr.To(true)}}
		}, "users[0].inactive"),
	whole("ntp", "time synchronisation (ignition: systemd-timesyncd)",
		func(s *bootstrapv1.KubeadmConfigSpec) bool { return s.NTP.IsDefined() }, rawRejected(),
		func(s *bootstrapv1.KubeadmConfigSpec) {
			s.NTP = upstreambootstrapv1.NTP{Servers: []string{"time.example.com"}}
		}),
	whole("verbosity", "kubeadm's --v",
		func(s *bootstrapv1.KubeadmConfigSpec) bool { return s.Verbosity != nil },
		map[bootstrapv1.Format]Treatment{bootstrapv1.Raw: {Verdict: Rejected, Note: "the agent chooses how to run kubeadm"}},
		func(s *bootstrapv1.KubeadmConfigSpec) { s.Verbosity = ptr.To[int32](5) }),
	whole("gzipUserData", "deliver the data gzip-compressed, as its consumer decompresses it (beyond upstream; see Size limits)",
		func(s *bootstrapv1.KubeadmConfigSpec) bool { return ptr.Deref(s.GzipUserData, false) },
		map[bootstrapv1.Format]Treatment{bootstrapv1.Raw: {Verdict: Rejected, Note: "the agent reads the data secret as it is, not through size-limited user data; false is accepted"}},
		func(s *bootstrapv1.KubeadmConfigSpec) { s.GzipUserData = ptr.To(true) }),
	{
		Field: "ignition", Description: "Ignition-only settings: containerLinuxConfig or butane (mutually exclusive)",
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.CloudConfig: {Verdict: Rejected, Note: "needs format: ignition (as upstream, reported on spec.format)"},
			bootstrapv1.Raw:         {Verdict: Rejected, Note: rawNote},
		},
		violations: func(s *bootstrapv1.KubeadmConfigSpec, format bootstrapv1.Format, base *field.Path) field.ErrorList {
			if !s.Ignition.IsDefined() {
				return nil
			}
			if format == bootstrapv1.Raw {
				return field.ErrorList{field.Forbidden(base.Child("ignition"), rawOnlyKubeadm)}
			}
			return field.ErrorList{field.Invalid(base.Child("format"), s.Format,
				fmt.Sprintf("must be set to %q if spec.ignition is set", bootstrapv1.Ignition))}
		},
		Example: func(s *bootstrapv1.KubeadmConfigSpec) {
			s.Ignition = bootstrapv1.IgnitionSpec{Butane: bootstrapv1.ButaneConfig{AdditionalConfig: "storage: {}\n"}}
		},
		ExamplePath:  "format",
		ExamplePaths: map[bootstrapv1.Format]string{bootstrapv1.Raw: "ignition"},
	},
}

func (r Rule) reportedIn(format bootstrapv1.Format, path string) Rule {
	if r.ExamplePaths == nil {
		r.ExamplePaths = map[bootstrapv1.Format]string{}
	}
	r.ExamplePaths[format] = path
	return r
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

// topLevel is the spec field a path starts with (files for files[].encoding).
func topLevel(path string) string {
	return strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' })[0]
}

func perItemRejectedInIgnition(name, description, note string, occurrences func(*bootstrapv1.KubeadmConfigSpec, *field.Path) []*field.Path, example func(*bootstrapv1.KubeadmConfigSpec), examplePath string) Rule {
	return Rule{
		Field: name, Description: description, Example: example, ExamplePath: examplePath,
		ExamplePaths: map[bootstrapv1.Format]string{bootstrapv1.Raw: topLevel(name)},
		Formats: map[bootstrapv1.Format]Treatment{
			bootstrapv1.Ignition: {Verdict: Rejected, Note: note},
			bootstrapv1.Raw:      {Verdict: Rejected, Note: "see its parent field"},
		},
		violations: func(s *bootstrapv1.KubeadmConfigSpec, format bootstrapv1.Format, base *field.Path) field.ErrorList {
			if format != bootstrapv1.Ignition {
				return nil // raw rejects the parent field as a whole
			}
			var errs field.ErrorList
			for _, p := range occurrences(s, base) {
				errs = append(errs, field.Forbidden(p, cannotUseIgnition))
			}
			return errs
		},
	}
}

// CheckFormatFields applies the table to spec for its format.
func CheckFormatFields(spec *bootstrapv1.KubeadmConfigSpec, base *field.Path) field.ErrorList {
	format := spec.EffectiveFormat()
	var errs field.ErrorList
	for _, r := range Rules {
		if r.Treatment(format).Verdict == Supported || r.violations == nil {
			continue
		}
		errs = append(errs, r.violations(spec, format, base)...)
	}
	return errs
}
