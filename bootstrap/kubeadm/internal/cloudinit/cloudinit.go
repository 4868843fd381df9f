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

// Package cloudinit renders a bootstrap plan as cloud-init user data
// (#cloud-config). The document is built from typed values (Build) and
// written in one pass with every string in a style cloud-init's YAML 1.1
// loader reads back exactly (encode, yaml11); never pasted together from
// text templates.
package cloudinit

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
)

// Header starts the user data. The jinja line lets kubeadm configuration use
// cloud-init instance data (e.g. {{ ds.meta_data.local_hostname }} as the
// node name), as with upstream's provider.
const Header = "## template: jinja\n#cloud-config\n"

// placeholderPath exists to create /run/cluster-api through write_files, which
// also works where `mkdir -p` does not (Windows images).
const placeholderPath = plan.SentinelDir + "/placeholder"

// Config is the subset of cloud-config this provider writes.
type Config struct {
	WriteFiles []WriteFile           `json:"write_files,omitempty" yaml:"write_files,omitempty"`
	BootCmd    []string              `json:"bootcmd,omitempty" yaml:"bootcmd,omitempty"`
	RunCmd     []string              `json:"runcmd,omitempty" yaml:"runcmd,omitempty"`
	Users      []User                `json:"users,omitempty" yaml:"users,omitempty"`
	NTP        *NTP                  `json:"ntp,omitempty" yaml:"ntp,omitempty"`
	DiskSetup  map[string]DiskLayout `json:"disk_setup,omitempty" yaml:"disk_setup,omitempty"`
	FSSetup    []FSSetup             `json:"fs_setup,omitempty" yaml:"fs_setup,omitempty"`
	Mounts     [][]string            `json:"mounts,omitempty" yaml:"mounts,omitempty"`
}

// WriteFile is a write_files entry.
type WriteFile struct {
	Path        string `json:"path" yaml:"path"`
	Encoding    string `json:"encoding,omitempty" yaml:"encoding,omitempty"`
	Owner       string `json:"owner,omitempty" yaml:"owner,omitempty"`
	Permissions string `json:"permissions,omitempty" yaml:"permissions,omitempty"`
	Append      bool   `json:"append,omitempty" yaml:"append,omitempty"`
	Content     string `json:"content" yaml:"content"`
}

// ExpiredAccountDate is the expiry date of inactive users: day 1 of the epoch
// (day 0 reads as "never" to some tools, see shadow(5)).
const ExpiredAccountDate = "1970-01-02"

// User is a users entry.
type User struct {
	Name              string   `json:"name" yaml:"name"`
	Passwd            string   `json:"passwd,omitempty" yaml:"passwd,omitempty"`
	Gecos             string   `json:"gecos,omitempty" yaml:"gecos,omitempty"`
	Groups            string   `json:"groups,omitempty" yaml:"groups,omitempty"`
	HomeDir           string   `json:"homedir,omitempty" yaml:"homedir,omitempty"`
	ExpireDate        string   `json:"expiredate,omitempty" yaml:"expiredate,omitempty"`
	LockPasswd        *bool    `json:"lock_passwd,omitempty" yaml:"lock_passwd,omitempty"`
	Shell             string   `json:"shell,omitempty" yaml:"shell,omitempty"`
	PrimaryGroup      string   `json:"primary_group,omitempty" yaml:"primary_group,omitempty"`
	Sudo              string   `json:"sudo,omitempty" yaml:"sudo,omitempty"`
	SSHAuthorizedKeys []string `json:"ssh_authorized_keys,omitempty" yaml:"ssh_authorized_keys,omitempty"`
}

// NTP is the ntp module's configuration.
type NTP struct {
	Enabled *bool    `json:"enabled,omitempty" yaml:"enabled,omitempty"`
	Servers []string `json:"servers,omitempty" yaml:"servers,omitempty"`
}

// DiskLayout is one device of disk_setup.
type DiskLayout struct {
	TableType string `json:"table_type,omitempty" yaml:"table_type,omitempty"`
	// Layout is true/false or a list of partitions (percentages, or
	// [percentage, partition type] pairs).
	Layout    any   `json:"layout" yaml:"layout"`
	Overwrite *bool `json:"overwrite,omitempty" yaml:"overwrite,omitempty"`
}

// FSSetup is an fs_setup entry.
type FSSetup struct {
	Label      string   `json:"label,omitempty" yaml:"label,omitempty"`
	Filesystem string   `json:"filesystem" yaml:"filesystem"`
	Device     string   `json:"device" yaml:"device"`
	Partition  any      `json:"partition,omitempty" yaml:"partition,omitempty"`
	Overwrite  *bool    `json:"overwrite,omitempty" yaml:"overwrite,omitempty"`
	ReplaceFS  string   `json:"replace_fs,omitempty" yaml:"replace_fs,omitempty"`
	ExtraOpts  []string `json:"extra_opts,omitempty" yaml:"extra_opts,omitempty"`
}

// Render returns the #cloud-config user data for p.
func Render(p *plan.Plan) ([]byte, error) {
	c, err := Build(p)
	if err != nil {
		return nil, err
	}
	size := len(Header) + 512
	for _, f := range c.WriteFiles {
		size += len(f.Path) + len(f.Content) + len(f.Content)/16 + 96
	}
	out, err := encode(append(make([]byte, 0, size), Header...), c)
	if err != nil {
		return nil, fmt.Errorf("encoding cloud-config: %w", err)
	}
	out = escapeJinja(out)
	if p.Compress {
		// cloud-init recognises gzip by its magic bytes and decompresses
		// before it looks at the jinja and #cloud-config lines.
		return plan.Gzip(out)
	}
	return out, nil
}

// Build translates the plan into the cloud-config structure.
func Build(p *plan.Plan) (*Config, error) {
	c := &Config{BootCmd: p.BootCommands}

	configPath := p.DefaultConfigPath()
	// Every file decodes (the plan checked): cloud-init would stop
	// write_files at the first that does not, the kubeadm configuration
	// among those it never writes.
	for _, f := range p.Files {
		c.WriteFiles = append(c.WriteFiles, WriteFile{
			Path: f.Path, Encoding: string(f.Encoding), Owner: f.Owner, Permissions: f.Permissions,
			Append: f.Append, Content: f.Content,
		})
	}
	c.WriteFiles = append(c.WriteFiles,
		WriteFile{Path: configPath, Owner: "root:root", Permissions: "0640", Content: p.Kubeadm.ConfigYAML()},
		WriteFile{Path: placeholderPath, Owner: "root:root", Permissions: "0640",
			Content: "Creates " + plan.SentinelDir + " for the bootstrap success sentinel."},
	)

	c.RunCmd = append(c.RunCmd, p.PreKubeadmCommands...)
	c.RunCmd = append(c.RunCmd, p.KubeadmCommand(configPath)+" && "+plan.SentinelCommand())
	c.RunCmd = append(c.RunCmd, p.PostKubeadmCommands...)

	for _, u := range p.Users {
		cu := User{
			Name: u.Name, Passwd: u.Passwd, Gecos: u.Gecos, Groups: u.Groups, HomeDir: u.HomeDir,
			LockPasswd: u.LockPassword, Shell: u.Shell, PrimaryGroup: u.PrimaryGroup, Sudo: u.Sudo,
			SSHAuthorizedKeys: u.SSHAuthorizedKeys,
		}
		if u.Inactive != nil && *u.Inactive {
			// An inactive user is an expired account: cloud-init passes
			// expiredate to useradd --expiredate, and a date in the past
			// refuses every login. (cloud-init's own `inactive` is useradd
			// --inactive, days of grace after the password expires: it
			// disables nothing while the password is valid.)
			cu.ExpireDate = ExpiredAccountDate
		}
		c.Users = append(c.Users, cu)
	}

	if p.NTP != nil {
		c.NTP = &NTP{Enabled: p.NTP.Enabled, Servers: p.NTP.Servers}
	}

	if errs := machinechecks.CloudInitDisks(upstreambootstrapv1.DiskSetup{Partitions: p.Partitions}, field.NewPath("spec")); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	for _, part := range p.Partitions {
		if c.DiskSetup == nil {
			c.DiskSetup = map[string]DiskLayout{}
		}
		d := DiskLayout{TableType: part.TableType, Overwrite: part.Overwrite, Layout: part.Layout != nil && *part.Layout}
		if len(part.DiskLayout) > 0 {
			layout := make([]any, 0, len(part.DiskLayout))
			for _, spec := range part.DiskLayout {
				if spec.PartitionType == "" {
					layout = append(layout, spec.Percentage)
					continue
				}
				layout = append(layout, []any{spec.Percentage, partitionTypeCode(spec.PartitionType)})
			}
			d.Layout = layout
		}
		c.DiskSetup[part.Device] = d
	}
	for _, fs := range p.Filesystems {
		entry := FSSetup{
			Label: fs.Label, Filesystem: fs.Filesystem, Device: fs.Device,
			Overwrite: fs.Overwrite, ReplaceFS: fs.ReplaceFS, ExtraOpts: fs.ExtraOpts,
		}
		if fs.Partition != "" {
			// cloud-init wants a partition number as a number, keywords as strings.
			if n, err := strconv.Atoi(fs.Partition); err == nil {
				entry.Partition = n
			} else {
				entry.Partition = fs.Partition
			}
		}
		c.FSSetup = append(c.FSSetup, entry)
	}
	for _, m := range p.Mounts {
		c.Mounts = append(c.Mounts, []string(m))
	}
	return c, nil
}

var partitionTypeCodes = map[string]string{
	upstreambootstrapv1.PartitionTypeLinux:         "83",
	upstreambootstrapv1.PartitionTypeLinuxSwap:     "82",
	upstreambootstrapv1.PartitionTypeLinuxRAID:     "fd",
	upstreambootstrapv1.PartitionTypeLVM:           "8e",
	upstreambootstrapv1.PartitionTypeFat32:         "0c",
	upstreambootstrapv1.PartitionTypeNTFS:          "07",
	upstreambootstrapv1.PartitionTypeLinuxExtended: "85",
}

// partitionTypeCode maps the API's partition type names to the MBR type codes
// cloud-init passes to sfdisk; GUIDs pass through. Numeric codes are emitted
// as numbers, as cloud-init's schema expects.
func partitionTypeCode(t string) any {
	code := partitionTypeCodes[t]
	if code == "" {
		return t
	}
	if n, err := strconv.Atoi(code); err == nil {
		return n
	}
	return code
}
