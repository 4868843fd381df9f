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

package supportedversions_test

import (
	"strings"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/supportedversions"
)

func TestCheck(t *testing.T) {
	for version, supported := range map[string]bool{
		"v1.31.0": true, "v1.31.14": true, "1.36.3": true, "v1.37.2": true, "v1.37.0-rc.1": true,
		"v1.30.14": false, "v1.38.0": false, "v1.38.0-alpha.1": false, "v2.31.0": false, "v0.31.0": false, "latest": false,
	} {
		err := supportedversions.Check(version)
		if (err == nil) != supported {
			t.Errorf("%s: got %v, want supported=%v", version, err, supported)
		}
		if err != nil && !strings.Contains(err.Error(), version) {
			t.Errorf("%s: the message does not name the version: %v", version, err)
		}
		if err != nil && version != "latest" && !strings.Contains(err.Error(), "v1.31 to v1.37") {
			t.Errorf("%s: the message does not give the range: %v", version, err)
		}
	}
}

func TestMinors(t *testing.T) {
	minors := supportedversions.Minors()
	if len(minors) != 7 || !minors[0].EQ(supportedversions.Oldest) || !minors[6].EQ(supportedversions.Newest) {
		t.Errorf("minors %v, want the seven from %v to %v", minors, supportedversions.Oldest, supportedversions.Newest)
	}
}
