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

// Package machinechecks decides whether the parts of a spec that reach the
// machine as they are written would work there: file contents that must
// decode, file modes, and, under Ignition, devices and mounts as systemd and
// Ignition read them. Admission (fieldrules) and the renderers call the same
// functions, so a spec that is admitted renders, and one that renders runs:
// a problem is refused when the KubeadmConfig is written, with its field, not
// found on the machine, where cloud-init stops writing files at the first
// that does not decode and a failed mount keeps kubeadm from running.
package machinechecks

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// Decode returns a file's content as the machine writes it, decoded from
// its encoding, or an error when it does not decode or decodes to more than
// MaxContent bytes; the error says what is wrong, never the content.
func Decode(encoding upstreambootstrapv1.Encoding, content string) ([]byte, error) {
	var out bytes.Buffer
	if _, err := decode(encoding, content, MaxContent, &out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// errTooLarge is decoded content over the limit it was decoded with.
var errTooLarge = errors.New("decodes to too much")

// decode writes content, decoded, to w and returns how many bytes that was.
// It stops at limit bytes (errTooLarge): compressed content is streamed, never
// inflated in full first, so a small gzip value that inflates to gigabytes
// costs no more than limit.
func decode(encoding upstreambootstrapv1.Encoding, content string, limit int, w io.Writer) (int, error) {
	switch encoding {
	case "":
		if len(content) > limit {
			return 0, errTooLarge
		}
		n, err := io.WriteString(w, content)
		return n, err
	case upstreambootstrapv1.Base64:
		b, err := unbase64(content)
		if err != nil {
			return 0, err
		}
		if len(b) > limit {
			return 0, errTooLarge
		}
		return w.Write(b)
	case upstreambootstrapv1.Gzip:
		return gunzip(strings.NewReader(content), limit, w)
	case upstreambootstrapv1.GzipBase64:
		b, err := unbase64(content)
		if err != nil {
			return 0, err
		}
		return gunzip(bytes.NewReader(b), limit, w)
	}
	return 0, fmt.Errorf("unknown encoding %q", encoding)
}

func unbase64(content string) ([]byte, error) {
	// Standard base64, padded, read as cloud-init's Python reads it:
	// characters outside the alphabet (line breaks, spaces) are skipped.
	alphabet := strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '/' || r == '=' {
			return r
		}
		return -1
	}, content)
	b, err := base64.StdEncoding.DecodeString(alphabet)
	if err != nil {
		return nil, fmt.Errorf("is not valid base64 (%v)", err)
	}
	return b, nil
}

// gunzip streams what compressed decompresses to into w, at most limit bytes.
func gunzip(compressed io.Reader, limit int, w io.Writer) (int, error) {
	r, err := gzip.NewReader(compressed)
	if err != nil {
		return 0, fmt.Errorf("is not valid gzip (%v)", err)
	}
	n, err := io.Copy(w, io.LimitReader(r, int64(limit)+1))
	switch {
	case err != nil:
		return 0, fmt.Errorf("is not valid gzip (%v)", err)
	case n > int64(limit):
		return 0, errTooLarge
	}
	return int(n), nil
}

// Mode parses a file's permissions as the machine does: an octal mode of at
// most 0o7777 (cloud-init falls back to its default for anything else, with
// a warning nobody sees; Ignition and the raw agent refuse it).
func Mode(permissions string) (uint32, error) {
	m, err := strconv.ParseUint(permissions, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("%q is not an octal file mode (at most 7777)", permissions)
	}
	return uint32(m), nil
}

// Files checks spec.files at base: inline content that must decode under its
// encoding, all of it within MaxContent (content from a Secret or a template
// is checked when it is rendered), and permissions that are a mode.
func Files(files []upstreambootstrapv1.File, base *field.Path) field.ErrorList {
	var errs field.ErrorList
	var budget Budget
	for i, f := range files {
		p := base.Index(i)
		inline := !f.ContentFrom.IsDefined() && f.ContentFormat != upstreambootstrapv1.FileContentFormatTemplate
		if inline && !budget.Over() {
			err := budget.Spend(p.Child("content"), len(f.Content))
			if err == nil {
				err = budget.Decodes(p.Child("content"), f.Encoding, f.Content)
			}
			var ce *ContentError
			if errors.As(err, &ce) {
				errs = append(errs, ce.FieldError())
			}
		}
		if f.Permissions != "" {
			if _, err := Mode(f.Permissions); err != nil {
				errs = append(errs, field.Invalid(p.Child("permissions"), f.Permissions, err.Error()))
			}
		}
	}
	return errs
}

// CloudInitDisks checks diskSetup for cloud-init: its disk_setup is keyed by
// device, so a device given twice would keep one of the two layouts.
func CloudInitDisks(disks upstreambootstrapv1.DiskSetup, base *field.Path) field.ErrorList {
	var errs field.ErrorList
	devices := map[string]int{}
	for i, part := range disks.Partitions {
		if first, ok := devices[part.Device]; ok {
			errs = append(errs, field.Duplicate(base.Child("diskSetup", "partitions").Index(i).Child("device"),
				fmt.Sprintf("%s (as diskSetup.partitions[%d])", part.Device, first)))
			continue
		}
		devices[part.Device] = i
	}
	return errs
}

// cloudInitAlias matches the device names only cloud-init resolves, from
// the datasource's block device mapping: Ignition has nothing to resolve
// them with.
var cloudInitAlias = regexp.MustCompile(`^(ephemeral[0-9]+|swap|ami|root)$`)

// IgnitionDevice is a device as written for cloud-init (diskSetup, the
// first field of spec.mounts) as Ignition and systemd need it: an absolute
// path; LABEL=, UUID=, PARTLABEL= and PARTUUID= as their /dev/disk links; a
// label given to a file system in diskSetup as its /dev/disk/by-label link;
// a bare kernel name (xvdb) under /dev, as cloud-init reads it. cloud-init's
// aliases (ephemeral0, swap) have no meaning without cloud-init's datasource
// and are refused.
func IgnitionDevice(device string, labels map[string]bool) (string, error) {
	for prefix, dir := range map[string]string{"LABEL=": "by-label", "UUID=": "by-uuid", "PARTLABEL=": "by-partlabel", "PARTUUID=": "by-partuuid"} {
		if rest, ok := strings.CutPrefix(device, prefix); ok {
			return "/dev/disk/" + dir + "/" + rest, nil
		}
	}
	switch {
	case strings.HasPrefix(device, "/"):
		return device, nil
	case labels[device]:
		return "/dev/disk/by-label/" + device, nil
	case cloudInitAlias.MatchString(device):
		return "", fmt.Errorf("%q is a name only cloud-init resolves (from the cloud's block device mapping); under Ignition name the device itself, e.g. /dev/nvme1n1 or LABEL=<label>", device)
	case device == "" || strings.ContainsAny(device, " \t=:"):
		return "", fmt.Errorf("%q is not a device: give a path under /dev, LABEL= or UUID=", device)
	}
	return "/dev/" + device, nil
}

// virtualFilesystems mount a name, not a device.
var virtualFilesystems = map[string]bool{
	"tmpfs": true, "ramfs": true, "proc": true, "sysfs": true, "devpts": true, "devtmpfs": true, "overlay": true,
	"cgroup": true, "cgroup2": true, "hugetlbfs": true, "mqueue": true, "bpf": true, "none": true,
}

// IgnitionMountSource is what a systemd mount unit mounts for a spec.mounts
// entry: a virtual file system's name (tmpfs) and a network source
// (server:/export) as written, a device as IgnitionDevice makes it.
func IgnitionMountSource(m upstreambootstrapv1.MountPoints, labels map[string]bool) (string, error) {
	what := m[0]
	if virtualFilesystems[what] || (len(m) > 2 && virtualFilesystems[m[2]]) || strings.Contains(what, ":") {
		return what, nil
	}
	return IgnitionDevice(what, labels)
}

// IgnitionStorage checks diskSetup and mounts (at their paths below base)
// as the Ignition renderer turns them into Ignition's disks and file
// systems and systemd mount units, returning every problem.
func IgnitionStorage(disks upstreambootstrapv1.DiskSetup, mounts []upstreambootstrapv1.MountPoints, base *field.Path) field.ErrorList {
	var errs field.ErrorList
	devices := map[string]int{}
	for i, part := range disks.Partitions {
		p := base.Child("diskSetup", "partitions").Index(i).Child("device")
		device, err := IgnitionDevice(part.Device, nil)
		if err != nil {
			errs = append(errs, field.Invalid(p, part.Device, err.Error()))
			continue
		}
		if first, ok := devices[device]; ok {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s (as diskSetup.partitions[%d])", part.Device, first)))
			continue
		}
		devices[device] = i
	}
	labels := map[string]bool{}
	formatted := map[string]int{}
	for i, fs := range disks.Filesystems {
		p := base.Child("diskSetup", "filesystems").Index(i)
		device, err := IgnitionDevice(fs.Device, nil)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("device"), fs.Device, err.Error()))
			continue
		}
		if first, ok := formatted[device]; ok {
			errs = append(errs, field.Duplicate(p.Child("device"), fmt.Sprintf("%s (as diskSetup.filesystems[%d])", fs.Device, first)))
		}
		formatted[device] = i
		if fs.Label != "" {
			labels[fs.Label] = true
		}
	}
	mountPoints := map[string]int{}
	for i, m := range mounts {
		p := base.Child("mounts").Index(i)
		if len(m) < 2 {
			errs = append(errs, field.Invalid(p, strings.Join(m, " "), "needs at least a device and a mount point"))
			continue
		}
		if _, err := IgnitionMountSource(m, labels); err != nil {
			errs = append(errs, field.Invalid(p.Index(0), m[0], err.Error()))
		}
		where := path.Clean(m[1])
		if !strings.HasPrefix(m[1], "/") {
			errs = append(errs, field.Invalid(p.Index(1), m[1], "the mount point must be an absolute path"))
		} else if first, ok := mountPoints[where]; ok {
			errs = append(errs, field.Duplicate(p.Index(1), fmt.Sprintf("%s (as mounts[%d])", m[1], first)))
		} else {
			mountPoints[where] = i
		}
		if len(m) > 5 {
			if pass, err := strconv.Atoi(strings.TrimSpace(m[5])); err != nil || pass < 0 {
				errs = append(errs, field.Invalid(p.Index(5), m[5], "the fsck pass must be a number (0 to skip the check)"))
			}
		}
	}
	return errs
}
