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
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vincent-petithory/dataurl"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstrapdata"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

func renderBoth(t *testing.T, format bootstrapv1.Format, action plan.Action) (plain, compressed *bootstrapdata.Data) {
	t.Helper()
	return renderSized(t, plantest.Full(format, action), action, false), renderSized(t, plantest.Full(format, action), action, true)
}

// TestGzipUserDataReachesTheConsumerUnchanged hands compressed data to the
// consumers' own code: cloud-init's user-data processor must find the very
// user data the uncompressed output is, and Ignition's fetch-offline stage
// must end with the very config it ends with uncompressed.
func TestGzipUserDataReachesTheConsumerUnchanged(t *testing.T) {
	for _, action := range plan.Actions {
		t.Run(string(action), func(t *testing.T) {
			plain, compressed := renderBoth(t, bootstrapv1.CloudConfig, action)
			if !bytes.HasPrefix(compressed.Value, []byte{0x1f, 0x8b}) || len(compressed.Value) >= len(plain.Value) {
				t.Fatalf("cloud-config: %d bytes compressed, %d plain; want smaller gzip", len(compressed.Value), len(plain.Value))
			}
			parts, err := consumers.CloudInitUserData(compressed.Value)
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != 1 || parts[0].Type != "text/jinja2" || !bytes.Equal(parts[0].Payload, plain.Value) {
				t.Errorf("cloud-init reads the compressed user data as %d parts (first %q), not as the uncompressed jinja cloud-config", len(parts), firstType(parts))
			}

			plain, compressed = renderBoth(t, bootstrapv1.Ignition, action)
			if err := consumers.Ignition(compressed.Value); err != nil {
				t.Fatal(err)
			}
			want, err := consumers.IgnitionFetched(plain.Value)
			if err != nil {
				t.Fatal(err)
			}
			got, err := consumers.IgnitionFetched(compressed.Value)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decodedSources(t, want), decodedSources(t, got)); diff != "" {
				t.Errorf("Ignition applies another config from the compressed data (-plain +compressed):\n%s", diff)
			}
			if len(compressed.Value) >= len(plain.Value) {
				t.Errorf("ignition: %d bytes compressed, %d plain", len(compressed.Value), len(plain.Value))
			}
		})
	}
}

func firstType(parts []consumers.UserDataPart) string {
	if len(parts) == 0 {
		return ""
	}
	return parts[0].Type
}

// decodedSources is a config as JSON values with every data URL replaced by
// the bytes it carries: how a content is encoded is not what Ignition writes.
func decodedSources(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && k == "source" && strings.HasPrefix(s, "data:") {
					u, err := dataurl.DecodeString(s)
					if err != nil {
						t.Fatalf("source %.40s...: %v", s, err)
					}
					x[k] = string(u.Data)
					continue
				}
				x[k] = walk(e)
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		}
		return v
	}
	return walk(v)
}
