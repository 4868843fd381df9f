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
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// peakRSS reads this process's peak resident set (VmHWM) in bytes;
// resetPeakRSS sets the peak back to the current resident set.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func resetPeakRSS(t *testing.T) {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}

// TestHostileTemplatesFailFastInTheManager: the file templates that made the
// manager allocate gigabytes (an escaper given a large value a thousand
// times; 100 KiB of straight-line template text from a Secret) end in the
// TemplateFailed condition, naming the file and the bound and never the
// template, while the manager running in this process stays within a
// bounded resident set.
func TestHostileTemplatesFailFastInTheManager(t *testing.T) {
	startManager(t)
	f := newRunningCluster(t)
	const marker = "s3cr3t-marker"
	large := `{{ $a := printf "%4096d" 0 }}{{ range 6 }}{{ $a = print $a $a }}{{ end }}`
	escaper := large + `{{/* ` + marker + ` */}}{{ js` + strings.Repeat(" $a", 1000) + ` }}`
	straight := large + `{{/* ` + marker + ` */}}` + strings.Repeat(`{{ $v := print $a $a $a }}`, 4000)
	f.secret("templates", map[string]string{"straight": straight})

	runtime.GC()
	resetPeakRSS(t)
	before := peakRSS(t)
	_, escaperCfg := f.machine("escaper", false, withFiles(upstreambootstrapv1.File{
		Path: "/etc/escaper.conf", Content: escaper, ContentFormat: upstreambootstrapv1.FileContentFormatTemplate}))
	_, straightCfg := f.machine("straight", false, withFiles(upstreambootstrapv1.File{
		Path: "/etc/straight.conf", ContentFormat: upstreambootstrapv1.FileContentFormatTemplate,
		ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "templates", Key: "straight"}}}))
	for _, want := range []struct {
		cfg         *bootstrapv1.KubeadmConfig
		path, bound string
	}{
		{escaperCfg, "/etc/escaper.conf", "larger than 1048576 bytes"},
		{straightCfg, "/etc/straight.conf", "longer than 10240 bytes of template text"},
	} {
		c := f.waitForReason(want.cfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition, bootstrapv1.KubeadmConfigFileTemplateFailedReason)
		if !strings.Contains(c.Message, "spec.files[") || !strings.Contains(c.Message, want.path) || !strings.Contains(c.Message, want.bound) {
			t.Errorf("%s: the condition does not name the file and the bound: %q", want.cfg.Name, c.Message)
		}
		if strings.Contains(c.Message, marker) {
			t.Errorf("%s: the condition quotes the template: %q", want.cfg.Name, c.Message)
		}
	}
	if grown := peakRSS(t) - before; grown > 200<<20 {
		t.Errorf("the manager's resident set grew by %d MiB rendering the templates", grown>>20)
	} else {
		t.Logf("peak resident set grew by %d MiB", grown>>20)
	}
}
