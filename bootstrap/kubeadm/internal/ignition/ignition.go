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

// Package ignition renders a bootstrap plan as an Ignition v3 config for
// Flatcar Container Linux: files as data URLs, a oneshot kubeadm unit that
// runs the pre-commands, kubeadm, the sentinel and the post-commands, users
// with sudo drop-ins, timesyncd for NTP, and disks, filesystems and mount
// units. Extra configuration in Butane is translated and merged.
package ignition

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/unit"
	ignconfig "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/coreos/ignition/v2/config/validate"
	vpath "github.com/coreos/vcontext/path"
	"github.com/coreos/vcontext/report"
	"github.com/vincent-petithory/dataurl"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/placeholders"
)

const (
	// SpecVersion is the Ignition spec this renderer emits: the newest that
	// Butane's stable Flatcar variant (flatcar 1.1.0) targets.
	SpecVersion = "3.4.0"

	// The bootstrap's paths and unit, shared with admission's guard.
	ConfigPath = bootstrapv1.IgnitionKubeadmConfigPath
	ScriptPath = bootstrapv1.IgnitionKubeadmScriptPath
	DoneMarker = bootstrapv1.IgnitionKubeadmDoneMarker
	UnitName   = bootstrapv1.IgnitionKubeadmUnit

	timesyncdDropin = "/etc/systemd/timesyncd.conf.d/10-cluster-api.conf"
	timesyncdUnit   = "systemd-timesyncd.service"
	kubeletUnit     = "kubelet.service"
)

// Render returns the Ignition JSON for p.
func Render(p *plan.Plan) ([]byte, error) {
	cfg, err := Build(p)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("marshalling Ignition config: %w", err)
	}
	// An invalid config is an error here, not a machine that never boots.
	// A config merged with the user's Butane or Container Linux Config goes
	// through Ignition's own parser whole. One this renderer generated alone
	// is checked with Ignition's own rules for everything taken from the spec
	// (see validateGenerated), skipping the reflective walk and the re-parse
	// of the file contents built here, which cost twenty times the rendering.
	if p.Ignition.IsDefined() {
		if _, report, err := ignconfig.Parse(out); err != nil {
			return nil, fmt.Errorf("generated Ignition config is invalid: %w: %s", err, report.String())
		}
	} else if report := validateGenerated(cfg); report.IsFatal() {
		return nil, fmt.Errorf("generated Ignition config is invalid: %s", report.String())
	}
	if p.Compress {
		return compressed(cfg)
	}
	return out, nil
}

// compressed is a config that Ignition replaces, before acting on it, with
// cfg: a gzip-compressed data URL, which Ignition fetches and decompresses
// itself (config.replace with compression: gzip). Inside, text contents are
// percent-encoded rather than base64: gzip shrinks text, not base64 of it.
func compressed(cfg *types.Config) ([]byte, error) {
	for i := range cfg.Storage.Files {
		f := &cfg.Storage.Files[i]
		textSource(&f.Contents)
		for j := range f.Append {
			textSource(&f.Append[j])
		}
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("marshalling Ignition config: %w", err)
	}
	gz, err := plan.Gzip(config)
	if err != nil {
		return nil, err
	}
	wrapper := types.Config{Ignition: types.Ignition{
		Version: SpecVersion,
		Config:  types.IgnitionConfig{Replace: types.Resource{Source: dataURL(gz), Compression: ptr.To("gzip")}},
	}}
	return json.Marshal(wrapper)
}

// validateGenerated runs the validations Ignition's types define for the
// objects this renderer fills from the spec (nodes, modes, owners, disks,
// partitions, filesystems, mount units), the config-wide cross-checks (paths
// against symlinks and units) and Ignition's duplicate detection. File
// contents are this renderer's own data URLs and are not re-parsed. The fuzz
// target parses every output with Ignition's full parser, so a rule missing
// here shows up there.
func validateGenerated(cfg *types.Config) report.Report {
	var r report.Report
	c := vpath.New("json")
	r.Merge(cfg.Validate(c))
	r.Merge(cfg.Storage.Validate(c.Append("storage")))
	for _, v := range []reflect.Value{reflect.ValueOf(cfg.Storage), reflect.ValueOf(cfg.Systemd), reflect.ValueOf(cfg.Passwd)} {
		r.Merge(validate.ValidateDups(v, c))
	}
	for i, f := range cfg.Storage.Files {
		fc := c.Append("storage", "files", i)
		r.Merge(f.Validate(fc))
		r.Merge(f.User.Validate(fc.Append("user")))
		r.Merge(f.Group.Validate(fc.Append("group")))
	}
	for i, d := range cfg.Storage.Disks {
		dc := c.Append("storage", "disks", i)
		r.Merge(d.Validate(dc))
		for j, p := range d.Partitions {
			r.Merge(p.Validate(dc.Append("partitions", j)))
		}
	}
	for i, fs := range cfg.Storage.Filesystems {
		r.Merge(fs.Validate(c.Append("storage", "filesystems", i)))
	}
	for i, u := range cfg.Systemd.Units {
		// The kubeadm and timesyncd units are fixed text; mount units carry
		// the spec's devices and mount points.
		if strings.HasSuffix(u.Name, ".mount") {
			r.Merge(u.Validate(c.Append("systemd", "units", i)))
		}
	}
	return r
}

// Build translates the plan into an Ignition config, with any additional
// Butane or Container Linux Config merged in. What Ignition cannot express
// (bootCommands, inactive users, partitions other than gpt or sized in
// percentages, ...) plan.Build refused already, by the rule table.
func Build(p *plan.Plan) (*types.Config, error) {
	if err := checkVerbatim(p); err != nil {
		return nil, err
	}
	found, err := p.Kubeadm.Placeholders()
	if err != nil {
		return nil, fmt.Errorf("the ignition format: %w", err)
	}
	cfg := types.Config{Ignition: types.Ignition{Version: SpecVersion}}

	for _, f := range p.Files {
		file, err := fileFor(f)
		if err != nil {
			return nil, err
		}
		cfg.Storage.Files = append(cfg.Storage.Files, file)
	}
	cfg.Storage.Files = append(cfg.Storage.Files,
		inlineFile(ConfigPath, 0o600, p.Kubeadm.ConfigYAML()),
		inlineFile(ScriptPath, 0o700, script(p, found)),
	)

	if err := addUsers(&cfg, p); err != nil {
		return nil, err
	}
	addNTP(&cfg, p)
	mountPoints, err := addStorage(&cfg, p)
	if err != nil {
		return nil, err
	}
	cfg.Systemd.Units = append(cfg.Systemd.Units, types.Unit{
		Name: UnitName, Enabled: ptr.To(true), Contents: ptr.To(kubeadmUnit(mountPoints, len(found) > 0)),
	}, types.Unit{
		// kubeadm configures the kubelet and expects it to run from then on.
		Name: kubeletUnit, Enabled: ptr.To(true),
	})

	return mergeAdditional(cfg, p)
}

func script(p *plan.Plan, found []placeholders.Placeholder) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\nset -e\n")
	if len(found) > 0 {
		// First, as cloud-init renders its Jinja before any command runs.
		b.WriteString(fillPlaceholders(ConfigPath, found))
	}
	for _, c := range p.PreKubeadmCommands {
		b.WriteString(c + "\n")
	}
	b.WriteString(p.KubeadmCommand(ConfigPath) + "\n")
	b.WriteString("mkdir -p " + plan.SentinelDir + " && " + plan.SentinelCommand() + "\n")
	b.WriteString("touch " + DoneMarker + "\n")
	// The configuration holds the bootstrap token; upstream moves it away too.
	b.WriteString("rm -f " + ConfigPath + "\n")
	for _, c := range p.PostKubeadmCommands {
		b.WriteString(c + "\n")
	}
	return b.String()
}

func kubeadmUnit(mountPoints []string, metadata bool) string {
	var b strings.Builder
	b.WriteString("[Unit]\nDescription=Bootstrap this node with kubeadm (Cluster API)\n")
	// kubeadm needs the container runtime; ordering only, as Flatcar starts it on demand.
	wants, after := "network-online.target", "network-online.target containerd.service"
	if metadata {
		// Wants, not Requires: on a platform without Afterburn the script
		// falls back or stops with a message naming what is missing.
		wants, after = wants+" "+metadataUnit, after+" "+metadataUnit
	}
	b.WriteString("Wants=" + wants + "\nAfter=" + after + "\n")
	b.WriteString("ConditionPathExists=!" + DoneMarker + "\n")
	for _, m := range mountPoints {
		b.WriteString("RequiresMountsFor=" + m + "\n")
	}
	b.WriteString("\n[Service]\nType=oneshot\nRemainAfterExit=yes\n")
	if metadata {
		b.WriteString("EnvironmentFile=-" + MetadataEnvFile + "\nEnvironmentFile=-" + legacyMetadataEnvFile + "\n")
	}
	b.WriteString("ExecStart=/bin/bash " + ScriptPath + "\n")
	b.WriteString("\n[Install]\nWantedBy=multi-user.target\n")
	return b.String()
}

const dataURLPrefix = "data:text/plain;base64,"

// textSource rewrites a base64 data URL this renderer made into a
// percent-encoded one when the content is text.
func textSource(r *types.Resource) {
	if r.Source == nil || !strings.HasPrefix(*r.Source, dataURLPrefix) {
		return
	}
	b, err := base64.StdEncoding.DecodeString((*r.Source)[len(dataURLPrefix):])
	if err != nil || !utf8.Valid(b) {
		return
	}
	r.Source = ptr.To("data:," + dataurl.EscapeString(string(b)))
}

// dataURL is b as an RFC 2397 data URL (base64, so any bytes survive), built
// in one allocation.
func dataURL(b []byte) *string {
	out := make([]byte, len(dataURLPrefix)+base64.StdEncoding.EncodedLen(len(b)))
	copy(out, dataURLPrefix)
	base64.StdEncoding.Encode(out[len(dataURLPrefix):], b)
	s := string(out)
	return &s
}

func inlineFile(path string, mode int, content string) types.File {
	return types.File{
		Node:          types.Node{Path: path, Overwrite: ptr.To(true)},
		FileEmbedded1: types.FileEmbedded1{Mode: ptr.To(mode), Contents: types.Resource{Source: dataURL([]byte(content))}},
	}
}

func fileFor(f plan.File) (types.File, error) {
	if !strings.HasPrefix(f.Path, "/") {
		return types.File{}, fmt.Errorf("%s: path %q must be absolute", f.Source, f.Path)
	}
	content, err := f.Bytes()
	if err != nil {
		return types.File{}, err
	}
	out := types.File{Node: types.Node{Path: f.Path}}
	mode, ok, err := f.Mode()
	if err != nil {
		return types.File{}, err
	}
	if ok {
		out.Mode = ptr.To(mode)
	}
	if user, group := f.OwnerParts(); user != "" || group != "" {
		if user != "" {
			out.User = types.NodeUser{Name: ptr.To(user)}
		}
		if group != "" {
			out.Group = types.NodeGroup{Name: ptr.To(group)}
		}
	}
	if f.Append {
		out.Append = []types.Resource{{Source: dataURL(content)}}
	} else {
		out.Overwrite = ptr.To(true)
		out.Contents = types.Resource{Source: dataURL(content)}
	}
	return out, nil
}

func addUsers(cfg *types.Config, p *plan.Plan) error {
	sudoers := map[string]bool{}
	for _, u := range p.Users {
		pu := types.PasswdUser{Name: u.Name}
		if u.Gecos != "" {
			pu.Gecos = ptr.To(u.Gecos)
		}
		if u.HomeDir != "" {
			pu.HomeDir = ptr.To(u.HomeDir)
		}
		if u.Shell != "" {
			pu.Shell = ptr.To(u.Shell)
		}
		if u.PrimaryGroup != "" {
			pu.PrimaryGroup = ptr.To(u.PrimaryGroup)
		}
		// cloud-init locks a user's password unless lockPassword is false
		// (lock_passwd defaults to true); Ignition sets none in that case, so
		// both formats allow password logins for the same specs only.
		if u.Passwd != "" && u.LockPassword != nil && !*u.LockPassword {
			pu.PasswordHash = ptr.To(u.Passwd)
		}
		for _, g := range strings.Split(u.Groups, ",") {
			if g = strings.TrimSpace(g); g != "" {
				pu.Groups = append(pu.Groups, types.Group(g))
			}
		}
		for _, k := range u.SSHAuthorizedKeys {
			pu.SSHAuthorizedKeys = append(pu.SSHAuthorizedKeys, types.SSHAuthorizedKey(k))
		}
		cfg.Passwd.Users = append(cfg.Passwd.Users, pu)
		if u.Sudo != "" {
			cfg.Storage.Files = append(cfg.Storage.Files, inlineFile("/etc/sudoers.d/"+sudoersFile(u.Name, sudoers), 0o440, u.Name+" "+u.Sudo+"\n"))
		}
	}
	return nil
}

// sudoersFile names a user's sudoers drop-in so that sudo reads it: sudo
// skips files in sudoers.d whose names contain "." or end in "~" (sudoers(5)),
// which user names like "jane.doe" would. Names stay unique in taken.
func sudoersFile(user string, taken map[string]bool) string {
	name := strings.ReplaceAll(user, ".", "_")
	if strings.HasSuffix(name, "~") {
		name = strings.TrimRight(name, "~") + "_"
	}
	for candidate, i := name, 2; ; i++ {
		if !taken[candidate] {
			taken[candidate] = true
			return candidate
		}
		candidate = fmt.Sprintf("%s_%d", name, i)
	}
}

func addNTP(cfg *types.Config, p *plan.Plan) {
	// ntp.enabled: false means no time sync configuration at all, as cloud-init
	// skips its ntp module then; the image's own time sync stays as it is.
	if p.NTP == nil || (p.NTP.Enabled != nil && !*p.NTP.Enabled) {
		return
	}
	if len(p.NTP.Servers) > 0 {
		cfg.Storage.Files = append(cfg.Storage.Files,
			inlineFile(timesyncdDropin, 0o644, "[Time]\nNTP="+strings.Join(p.NTP.Servers, " ")+"\n"))
	}
	if p.NTP.Enabled != nil {
		cfg.Systemd.Units = append(cfg.Systemd.Units, types.Unit{Name: timesyncdUnit, Enabled: ptr.To(*p.NTP.Enabled)})
	}
}

// addStorage adds disks, filesystems and one mount unit per spec.mounts entry
// (fields as in fstab: what, where, type, options); it returns the mount points.
// Devices and mounts pass the checks admission applies (machinechecks) first.
func addStorage(cfg *types.Config, p *plan.Plan) ([]string, error) {
	disks := upstreambootstrapv1.DiskSetup{Partitions: p.Partitions, Filesystems: p.Filesystems}
	if errs := machinechecks.IgnitionStorage(disks, p.Mounts, field.NewPath("spec")); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	for _, part := range p.Partitions {
		device, _ := machinechecks.IgnitionDevice(part.Device, nil)
		d := types.Disk{Device: device, WipeTable: part.Overwrite}
		if ptr.Deref(part.Layout, false) {
			d.Partitions = []types.Partition{{Number: 1}} // one partition over the whole disk
		}
		cfg.Storage.Disks = append(cfg.Storage.Disks, d)
	}
	labels := map[string]bool{}
	for _, fs := range p.Filesystems {
		device, _ := machinechecks.IgnitionDevice(fs.Device, nil)
		f := types.Filesystem{Device: device, Format: ptr.To(fs.Filesystem), WipeFilesystem: fs.Overwrite}
		if fs.Label != "" {
			f.Label = ptr.To(fs.Label)
			labels[fs.Label] = true
		}
		for _, o := range fs.ExtraOpts {
			f.Options = append(f.Options, types.FilesystemOption(o))
		}
		cfg.Storage.Filesystems = append(cfg.Storage.Filesystems, f)
	}

	var mountPoints []string
	for _, m := range p.Mounts {
		what, _ := machinechecks.IgnitionMountSource(m, labels)
		where := m[1]
		var b strings.Builder
		b.WriteString("[Unit]\nDescription=Mount " + where + " (Cluster API)\nBefore=" + UnitName + "\n")
		if len(m) > 5 {
			// fstab's sixth field, the fsck pass: systemd's fstab generator
			// checks a block device before mounting it unless the pass is 0.
			if pass, _ := strconv.Atoi(strings.TrimSpace(m[5])); pass > 0 && strings.HasPrefix(what, "/dev/") {
				fsck := "systemd-fsck@" + unit.UnitNamePathEscape(what) + ".service"
				b.WriteString("Requires=" + fsck + "\nAfter=" + fsck + "\n")
			}
		}
		b.WriteString("\n[Mount]\n")
		b.WriteString("What=" + what + "\nWhere=" + where + "\n")
		if len(m) > 2 && m[2] != "" && m[2] != "auto" {
			b.WriteString("Type=" + m[2] + "\n")
		}
		if len(m) > 3 && m[3] != "" && m[3] != "defaults" {
			b.WriteString("Options=" + m[3] + "\n")
		}
		b.WriteString("\n[Install]\nWantedBy=multi-user.target\n")
		name := unit.UnitNamePathEscape(where) + ".mount"
		cfg.Systemd.Units = append(cfg.Systemd.Units, types.Unit{Name: name, Enabled: ptr.To(true), Contents: ptr.To(b.String())})
		mountPoints = append(mountPoints, where)
	}
	return mountPoints, nil
}
