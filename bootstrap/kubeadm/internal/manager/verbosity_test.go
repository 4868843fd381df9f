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

package manager

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestVerbosityEndpointKeepsTheCap: the diagnostics server's log-level
// endpoint refuses the levels the start-time flags refuse (from 8 on,
// client-go logs request bodies: tokens, keys, bootstrap data) and sets the
// others.
func TestVerbosityEndpointKeepsTheCap(t *testing.T) {
	opts, err := ParseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, metricsOpts, err := diagnosticsOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	handler, ok := metricsOpts.ExtraHandlers[verbosityEndpoint]
	if !ok {
		t.Fatalf("the diagnostics server has no %s endpoint", verbosityEndpoint)
	}
	put := func(level string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, verbosityEndpoint, strings.NewReader(level)))
		return rec
	}
	defer put("0")

	if rec := put("3"); rec.Code != http.StatusOK || !klog.V(3).Enabled() || klog.V(4).Enabled() {
		t.Fatalf("PUT 3: %d %q, verbosity 3 enabled %v, 4 enabled %v", rec.Code, rec.Body, klog.V(3).Enabled(), klog.V(4).Enabled())
	}
	for _, level := range []string{"8", "10", "4294967295"} {
		rec := put(level)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "above 7 is refused") {
			t.Errorf("PUT %s: %d %q, want 400 naming the cap", level, rec.Code, rec.Body)
		}
		if klog.V(4).Enabled() {
			t.Fatalf("PUT %s raised the verbosity", level)
		}
	}
	if rec := put("eight"); rec.Code != http.StatusBadRequest {
		t.Errorf("PUT eight: %d, want 400", rec.Code)
	}
	if rec := put("7"); rec.Code != http.StatusOK || !klog.V(7).Enabled() {
		t.Errorf("PUT 7 (the cap): %d %q", rec.Code, rec.Body)
	}
}
