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

package kubeadmconfig_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// TestDataOverTheSizeLimitIsReported: with --bootstrap-data-size-limit, a
// config whose data is larger gets a False condition and a warning event
// (and still its data secret); one that fits, or fits once compressed, gets True.
func TestDataOverTheSizeLimitIsReported(t *testing.T) {
	const limit = 6000
	startManager(t, "--bootstrap-data-size-limit=6000")
	f := newRunningCluster(t)

	big := joinSpec(bootstrapv1.CloudConfig, false)
	big.Files = []upstreambootstrapv1.File{{Path: "/etc/motd", Content: strings.Repeat("a long welcome message\n", 400)}}
	compressed := *big.DeepCopy()
	compressed.GzipUserData = ptr.To(true)

	_, small := f.machine("small", false, joinSpec(bootstrapv1.CloudConfig, false))
	_, large := f.machine("large", false, big)
	_, gz := f.machine("gzipped", false, compressed)

	for _, tc := range []struct {
		cfg    *bootstrapv1.KubeadmConfig
		status metav1.ConditionStatus
	}{{small, metav1.ConditionTrue}, {large, metav1.ConditionFalse}, {gz, metav1.ConditionTrue}} {
		sec := f.waitForData(tc.cfg)
		f.get(tc.cfg)
		c := findCondition(tc.cfg.Status.Conditions, bootstrapv1.KubeadmConfigBootstrapDataSizeWithinLimitCondition)
		if c == nil || c.Status != tc.status {
			t.Fatalf("%s (%d bytes): condition %+v, want %s", tc.cfg.Name, len(sec.Data["value"]), c, tc.status)
		}
		if (len(sec.Data["value"]) > limit) != (tc.status == metav1.ConditionFalse) {
			t.Errorf("%s: %d bytes against a limit of %d, condition %s", tc.cfg.Name, len(sec.Data["value"]), limit, c.Status)
		}
		if tc.status == metav1.ConditionFalse {
			if c.Reason != bootstrapv1.KubeadmConfigBootstrapDataTooLargeReason || !strings.Contains(c.Message, "gzipUserData") || !strings.Contains(c.Message, "6000") {
				t.Errorf("%s: %s: %s", tc.cfg.Name, c.Reason, c.Message)
			}
			f.waitFor("the warning event", 10*time.Second, func() bool { return hasEvent(t, tc.cfg, bootstrapv1.KubeadmConfigBootstrapDataTooLargeReason) })
		}
		if c := findCondition(tc.cfg.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s: the size does not make a config unready: %+v", tc.cfg.Name, c)
		}
	}
}
