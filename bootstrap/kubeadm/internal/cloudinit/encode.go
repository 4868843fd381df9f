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

package cloudinit

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/yaml11"
)

// encode writes c as YAML in one pass, every string through yaml11 so that
// cloud-init's YAML 1.1 loader reads back exactly what the plan holds. A
// generic encoder walks the structure by reflection and scans every string
// several times; user data is mostly large PEM and file bodies, which this
// copies about once.
func encode(b []byte, c *Config) ([]byte, error) {
	if len(c.WriteFiles) > 0 {
		b = append(b, "write_files:\n"...)
		for _, f := range c.WriteFiles {
			b = append(b, "- path:"...)
			b = yaml11.AppendString(b, f.Path, 2)
			b = optionalString(b, "encoding", f.Encoding, 2)
			b = optionalString(b, "owner", f.Owner, 2)
			b = optionalString(b, "permissions", f.Permissions, 2)
			if f.Append {
				b = append(b, "  append:"...)
				b = yaml11.AppendBool(b, true)
			}
			b = append(b, "  content:"...)
			b = yaml11.AppendString(b, f.Content, 2)
		}
	}
	b = stringList(b, "bootcmd", c.BootCmd)
	b = stringList(b, "runcmd", c.RunCmd)
	if len(c.Users) > 0 {
		b = append(b, "users:\n"...)
		for _, u := range c.Users {
			b = append(b, "- name:"...)
			b = yaml11.AppendString(b, u.Name, 2)
			b = optionalString(b, "passwd", u.Passwd, 2)
			b = optionalString(b, "gecos", u.Gecos, 2)
			b = optionalString(b, "groups", u.Groups, 2)
			b = optionalString(b, "homedir", u.HomeDir, 2)
			b = optionalString(b, "expiredate", u.ExpireDate, 2)
			if u.LockPasswd != nil {
				b = append(b, "  lock_passwd:"...)
				b = yaml11.AppendBool(b, *u.LockPasswd)
			}
			b = optionalString(b, "shell", u.Shell, 2)
			b = optionalString(b, "primary_group", u.PrimaryGroup, 2)
			b = optionalString(b, "sudo", u.Sudo, 2)
			if len(u.SSHAuthorizedKeys) > 0 {
				b = append(b, "  ssh_authorized_keys:\n"...)
				for _, k := range u.SSHAuthorizedKeys {
					b = append(b, "  -"...)
					b = yaml11.AppendString(b, k, 2)
				}
			}
		}
	}
	if c.NTP != nil {
		b = append(b, "ntp:\n"...)
		if c.NTP.Enabled != nil {
			b = append(b, "  enabled:"...)
			b = yaml11.AppendBool(b, *c.NTP.Enabled)
		}
		if len(c.NTP.Servers) > 0 {
			b = append(b, "  servers:\n"...)
			for _, s := range c.NTP.Servers {
				b = append(b, "  -"...)
				b = yaml11.AppendString(b, s, 2)
			}
		}
		if c.NTP.Enabled == nil && len(c.NTP.Servers) == 0 {
			b = b[:len(b)-1]
			b = append(b, " {}\n"...)
		}
	}
	if len(c.DiskSetup) > 0 {
		b = append(b, "disk_setup:\n"...)
		devices := make([]string, 0, len(c.DiskSetup))
		for d := range c.DiskSetup {
			devices = append(devices, d)
		}
		slices.Sort(devices)
		for _, d := range devices {
			layout := c.DiskSetup[d]
			b = append(b, "  "...)
			b = yaml11.AppendQuoted(b, d)
			b = append(b, ":\n"...)
			b = optionalString(b, "table_type", layout.TableType, 4)
			b = append(b, "    layout:"...)
			var err error
			if b, err = appendLayout(b, layout.Layout); err != nil {
				return nil, err
			}
			if layout.Overwrite != nil {
				b = append(b, "    overwrite:"...)
				b = yaml11.AppendBool(b, *layout.Overwrite)
			}
		}
	}
	if len(c.FSSetup) > 0 {
		b = append(b, "fs_setup:\n"...)
		for _, fs := range c.FSSetup {
			b = append(b, "- filesystem:"...)
			b = yaml11.AppendString(b, fs.Filesystem, 2)
			b = append(b, "  device:"...)
			b = yaml11.AppendString(b, fs.Device, 2)
			b = optionalString(b, "label", fs.Label, 2)
			switch p := fs.Partition.(type) {
			case nil:
			case int:
				b = append(b, "  partition:"...)
				b = yaml11.AppendInt(b, int64(p))
			case string:
				b = optionalString(b, "partition", p, 2)
			default:
				return nil, fmt.Errorf("fs_setup partition of type %T", fs.Partition)
			}
			if fs.Overwrite != nil {
				b = append(b, "  overwrite:"...)
				b = yaml11.AppendBool(b, *fs.Overwrite)
			}
			b = optionalString(b, "replace_fs", fs.ReplaceFS, 2)
			if len(fs.ExtraOpts) > 0 {
				b = append(b, "  extra_opts:\n"...)
				for _, o := range fs.ExtraOpts {
					b = append(b, "  -"...)
					b = yaml11.AppendString(b, o, 2)
				}
			}
		}
	}
	if len(c.Mounts) > 0 {
		b = append(b, "mounts:\n"...)
		for _, m := range c.Mounts {
			if len(m) == 0 {
				b = append(b, "- []\n"...)
				continue
			}
			for i, field := range m {
				if i == 0 {
					b = append(b, "- -"...)
				} else {
					b = append(b, "  -"...)
				}
				b = yaml11.AppendString(b, field, 2)
			}
		}
	}
	return b, nil
}

func optionalString(b []byte, key, value string, indent int) []byte {
	if value == "" {
		return b
	}
	b = yaml11.AppendIndent(b, indent)
	b = append(b, key...)
	b = append(b, ':')
	return yaml11.AppendString(b, value, indent)
}

func stringList(b []byte, key string, values []string) []byte {
	if len(values) == 0 {
		return b
	}
	b = append(b, key...)
	b = append(b, ":\n"...)
	for _, v := range values {
		b = append(b, '-')
		b = yaml11.AppendString(b, v, 0)
	}
	return b
}

// appendLayout writes disk_setup's layout: true/false, or a list of
// percentages and [percentage, partition type] pairs.
func appendLayout(b []byte, layout any) ([]byte, error) {
	switch l := layout.(type) {
	case bool:
		return yaml11.AppendBool(b, l), nil
	case []any:
		b = append(b, '\n')
		for _, part := range l {
			b = append(b, "    -"...)
			switch p := part.(type) {
			case int32:
				b = yaml11.AppendInt(b, int64(p))
			case []any:
				if len(p) != 2 {
					return nil, fmt.Errorf("disk layout entry %v", p)
				}
				pct, ok := p[0].(int32)
				if !ok {
					return nil, fmt.Errorf("disk layout entry %v", p)
				}
				b = append(b, " ["...)
				b = strconv.AppendInt(b, int64(pct), 10)
				b = append(b, ", "...)
				// The partition type: a number sfdisk takes as is, or a code quoted as text.
				switch code := p[1].(type) {
				case int:
					b = strconv.AppendInt(b, int64(code), 10)
				case string:
					b = yaml11.AppendQuoted(b, code)
				default:
					return nil, fmt.Errorf("disk layout entry %v", p)
				}
				b = append(b, "]\n"...)
			default:
				return nil, fmt.Errorf("disk layout entry of type %T", part)
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("disk layout of type %T", layout)
}
