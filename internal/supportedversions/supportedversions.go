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

// Package supportedversions is the range of workload Kubernetes versions this
// provider supports: the minors Cluster API v1.14 supports for workload
// clusters, each of which the version matrix (make test-versions) checks
// with that minor's kubeadm. Admission refuses a KubeadmControlPlane version
// outside it; the docs state it.
package supportedversions

import (
	"fmt"

	"github.com/blang/semver/v4"
)

// Oldest and Newest are the first and last supported minors.
var (
	Oldest = semver.Version{Major: 1, Minor: 31}
	Newest = semver.Version{Major: 1, Minor: 37}
)

// Minors lists every supported minor, oldest first.
func Minors() []semver.Version {
	var out []semver.Version
	for m := Oldest.Minor; m <= Newest.Minor; m++ {
		out = append(out, semver.Version{Major: Oldest.Major, Minor: m})
	}
	return out
}

// Range says the range as the docs and error messages do: "v1.31 to v1.37".
func Range() string {
	return fmt.Sprintf("v%d.%d to v%d.%d", Oldest.Major, Oldest.Minor, Newest.Major, Newest.Minor)
}

// supported reports whether v's minor is in the range. Patches and
// pre-releases of a supported minor are supported: kubeadm's configuration
// API changes only between minors.
func supported(v semver.Version) bool {
	minor := semver.Version{Major: v.Major, Minor: v.Minor}
	return minor.GTE(Oldest) && minor.LTE(Newest)
}

// Check parses a version as Cluster API writes them (v1.36.3) and says why
// it is not supported, or returns nil.
func Check(version string) error {
	v, err := semver.ParseTolerant(version)
	if err != nil {
		return fmt.Errorf("%q is not a Kubernetes version", version)
	}
	if !supported(v) {
		return fmt.Errorf("Kubernetes %s is outside the versions this provider supports, %s", version, Range())
	}
	return nil
}
