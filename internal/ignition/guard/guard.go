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

// Package guard keeps extra Ignition configuration (Butane or a
// Container Linux Config merged on top of the bootstrap, where the user's
// side wins) from replacing, disabling or removing what the bootstrap needs.
// Admission refuses a conflict with both paths named; the guard and the
// Ignition renderer take the paths from the API package, so the two cannot
// drift apart.
package guard

import (
	"fmt"
	"path"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_4/types"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// protectedDirs hold what kubeadm and Cluster API read: the cluster's
// certificates, and the success sentinel infrastructure providers probe.
var protectedDirs = []string{"/etc/kubernetes/pki", "/run/cluster-api"}

func protected(p string) bool {
	p = path.Clean(p)
	if p == bootstrapv1.IgnitionKubeadmConfigPath || p == bootstrapv1.IgnitionKubeadmScriptPath || p == bootstrapv1.IgnitionKubeadmDoneMarker {
		return true
	}
	for _, d := range protectedDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// Conflicts lists what extra configuration does to the bootstrap: files,
// directories or links at its paths, and the kubeadm unit replaced, disabled
// or masked. Drop-ins that extend the unit are fine. where names the extra
// configuration's field (e.g. spec.ignition.butane.additionalConfig).
func Conflicts(extra types.Config, where string) []string {
	var out []string
	for i, f := range extra.Storage.Files {
		if protected(f.Path) {
			out = append(out, fmt.Sprintf("%s: storage.files[%d] writes %s, which the bootstrap writes and needs", where, i, path.Clean(f.Path)))
		}
	}
	for i, d := range extra.Storage.Directories {
		if protected(d.Path) {
			out = append(out, fmt.Sprintf("%s: storage.directories[%d] is %s, a path the bootstrap writes and needs", where, i, path.Clean(d.Path)))
		}
	}
	for i, l := range extra.Storage.Links {
		if protected(l.Path) {
			out = append(out, fmt.Sprintf("%s: storage.links[%d] replaces %s, which the bootstrap writes and needs", where, i, path.Clean(l.Path)))
		}
	}
	for i, u := range extra.Systemd.Units {
		if u.Name != bootstrapv1.IgnitionKubeadmUnit {
			continue
		}
		switch {
		case u.Contents != nil:
			out = append(out, fmt.Sprintf("%s: systemd.units[%d] replaces %s, the unit that runs kubeadm (extend it with a drop-in instead)", where, i, bootstrapv1.IgnitionKubeadmUnit))
		case u.Enabled != nil && !*u.Enabled:
			out = append(out, fmt.Sprintf("%s: systemd.units[%d] disables %s, the unit that runs kubeadm", where, i, bootstrapv1.IgnitionKubeadmUnit))
		case u.Mask != nil && *u.Mask:
			out = append(out, fmt.Sprintf("%s: systemd.units[%d] masks %s, the unit that runs kubeadm", where, i, bootstrapv1.IgnitionKubeadmUnit))
		}
	}
	return out
}

// SpecFileOverlaps lists the files and links extra configuration writes at a
// path a spec.files entry writes too (specFiles: clean path to the entry's
// field). Ignition merges the extra configuration last, so its entry
// replaces the spec's; admission says so in a warning.
func SpecFileOverlaps(extra types.Config, specFiles map[string]string, where string) []string {
	var out []string
	for i, f := range extra.Storage.Files {
		if field, ok := specFiles[path.Clean(f.Path)]; ok {
			out = append(out, fmt.Sprintf("%s: storage.files[%d] writes %s, which %s writes too: the extra configuration's entry replaces it", where, i, path.Clean(f.Path), field))
		}
	}
	for i, l := range extra.Storage.Links {
		if field, ok := specFiles[path.Clean(l.Path)]; ok {
			out = append(out, fmt.Sprintf("%s: storage.links[%d] at %s replaces what %s writes", where, i, path.Clean(l.Path), field))
		}
	}
	return out
}
