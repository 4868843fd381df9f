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
	"slices"
	"testing"

	"github.com/blang/semver/v4"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/supportedversions"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

// The version matrix (TestVersionMatrix, make test-versions) checks one
// version of every supported minor and nothing else, so that the range
// admission states is the range checked.
func TestVersionMatrixIsTheSupportedRange(t *testing.T) {
	versions := testbin.MatrixVersions()
	minors := supportedversions.Minors()
	if len(versions) != len(minors) {
		t.Fatalf("matrix %v, supported minors %v", versions, minors)
	}
	for i, v := range versions {
		parsed, err := semver.ParseTolerant(v)
		if err != nil {
			t.Fatal(err)
		}
		if parsed.Major != minors[i].Major || parsed.Minor != minors[i].Minor || len(parsed.Pre) > 0 {
			t.Errorf("matrix version %d is %s, want a release of v%d.%d", i, v, minors[i].Major, minors[i].Minor)
		}
	}
	// The version the e2e nodes boot is the one checked for its minor.
	if booted := testbin.Versions["KUBERNETES_VERSION"]; !slices.Contains(versions, booted) {
		t.Errorf("the matrix %v does not hold KUBERNETES_VERSION %s", versions, booted)
	}
}
