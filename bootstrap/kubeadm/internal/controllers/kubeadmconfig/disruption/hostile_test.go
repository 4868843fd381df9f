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

package disruption

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/hostile"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// hostileMarker is in every hostile template and Secret value: no condition
// may quote it.
const hostileMarker = "s3cr3t-marker"

// hostileClass is one kind of KubeadmConfig, small as written, that costs
// the manager far more to render than it says, and how it must end.
type hostileClass struct {
	name  string
	files []upstreambootstrapv1.File
	// reason and bound are what its DataSecretAvailable condition must
	// say, at one of the fields at.
	reason, bound string
	at            []string
	// slowTemplate: its template takes long enough that, on a busy
	// machine, the template time bound may refuse it first.
	slowTemplate bool
}

func hostileClasses() []hostileClass {
	many := func(n int, f upstreambootstrapv1.File) []upstreambootstrapv1.File {
		out := make([]upstreambootstrapv1.File, n)
		for i := range out {
			out[i] = f
			out[i].Path = fmt.Sprintf("/etc/hostile/%d", i)
		}
		return out
	}
	template := func(text string) upstreambootstrapv1.File {
		return upstreambootstrapv1.File{Content: text, ContentFormat: upstreambootstrapv1.FileContentFormatTemplate}
	}
	fromSecret := func(name, key string) upstreambootstrapv1.File {
		return upstreambootstrapv1.File{ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: name, Key: key}}}
	}
	bombTemplate := template(`{{/* ` + hostileMarker + ` */}}{{ range 600 }}` + hostile.MemberBase64() + `{{ end }}`)
	bombTemplate.Encoding = upstreambootstrapv1.GzipBase64
	bombSecret := fromSecret("bombs", "gzip")
	bombSecret.Encoding = upstreambootstrapv1.Gzip
	var largeSecrets []upstreambootstrapv1.File
	for i := range largeSecretCount {
		f := fromSecret(fmt.Sprintf("large-%d", i), "value")
		f.Path = fmt.Sprintf("/etc/large/%d", i)
		largeSecrets = append(largeSecrets, f)
	}
	tooLarge, templateFailed := bootstrapv1.KubeadmConfigContentTooLargeReason, bootstrapv1.KubeadmConfigFileTemplateFailedReason
	return []hostileClass{
		{"templated gzip+base64 bomb", many(1, bombTemplate), tooLarge, "decodes to more than 1048576 bytes", []string{"spec.files[0]"}, true},
		{"gzip bomb in a Secret", many(1, bombSecret), tooLarge, "decodes to more than 1048576 bytes", []string{"spec.files[0]"}, false},
		{"one large Secret key in 200 files", many(200, fromSecret("large", "value")), tooLarge, "comes to more than 1048576 bytes", []string{"spec.files[1]"}, false},
		{"many large Secrets", largeSecrets, tooLarge, "comes to more than 1048576 bytes", []string{"spec.files[1].contentFrom"}, false},
		{"200 templates near the output bound", many(200, template(`{{ range 1020 }}{{ printf "%1000d" 0 }}{{ end }}`+hostileMarker)),
			templateFailed, "output exceeds 1048576 bytes", []string{"spec.files[1]"}, true},
		// The first may run out of time already, on a busy machine.
		{"200 templates near the step bound", many(200, template(`{{ range 99000 }}{{ end }}`+hostileMarker)), templateFailed, "runs too long", []string{"spec.files[0]", "spec.files[1]"}, false},
		{"a template that calls itself", many(1, template(`{{ define "a" }}{{ template "a" . }}{{ end }}{{ template "a" . }}`+hostileMarker)),
			templateFailed, "calls itself", []string{"spec.files[0]"}, false},
	}
}

// largeSecretCount Secrets of 900 KiB each are named by the "many large
// Secrets" class.
const largeSecretCount = 30

// TestHostileConfigsStayTheirOwnProblem: the manager runs as its Deployment
// runs it, in a memory cgroup at the shipped limit with GOMEMLIMIT set to
// it. Four copies of every hostile class (each once took the manager past
// that limit: it was killed, read the same configs again at start, and
// crash-looped) are created beside 20 healthy Machines. The healthy
// Machines all get their data, every hostile config gets a condition that
// names its field and bound and quotes nothing, and the manager is never
// killed.
func TestHostileConfigsStayTheirOwnProblem(t *testing.T) {
	f := newFixture(t, "hostile", true)
	limit := shippedMemoryLimit(t)
	plain := strings.Repeat(hostileMarker, 900<<10/len(hostileMarker))
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bombs", Namespace: f.ns}, Data: map[string][]byte{"gzip": hostile.GzipBomb(900)}})
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "large", Namespace: f.ns}, Data: map[string][]byte{"value": []byte(plain)}})
	f.inParallel(largeSecretCount, func(i int) error {
		return f.client().Create(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("large-%d", i), Namespace: f.ns},
			Data: map[string][]byte{"value": []byte(plain)}})
	})

	d := newDeployment(t, mgmt, f.ns)
	d.memoryLimit = limit
	d.start()
	manager := d.leader()

	const copies = 4
	classes := hostileClasses()
	f.inParallel(len(classes)*copies, func(i int) error {
		c := classes[i/copies]
		spec := bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.CloudConfig, Files: c.files}
		return f.createWorker(fmt.Sprintf("hostile-%d", i), spec)
	})
	f.createMachines(20)

	start := time.Now()
	var pending []string
	for time.Since(start) < 3*time.Minute {
		if manager.Exited() {
			t.Fatalf("the manager was killed (over its %d MiB limit?); the end of its log:\n%s", limit>>20, manager.LogTail())
		}
		pending = f.unsettled(classes, copies)
		if len(pending) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(pending) > 0 {
		t.Fatalf("after %s, still not as they must be:\n%s", time.Since(start).Round(time.Second), strings.Join(pending, "\n"))
	}
	peak, err := manager.PeakMemory()
	f.must(err)
	t.Logf("every config settled in %s; the manager's peak memory was %d MiB of its %d MiB", time.Since(start).Round(100*time.Millisecond), peak>>20, limit>>20)
	if manager.Exited() || d.started != 1 {
		t.Fatalf("the manager restarted")
	}
	d.stop()
}

// unsettled lists the configs not yet as they must end: a healthy one
// without data, a hostile one without its condition, or a condition that
// quotes content.
func (f *fixture) unsettled(classes []hostileClass, copies int) []string {
	var out []string
	for _, c := range f.configs() {
		dataCond := conditions.Get(&c, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition)
		var i int
		if _, err := fmt.Sscanf(c.Name, "hostile-%d", &i); err != nil {
			if !ptr.Deref(c.Status.Initialization.DataSecretCreated, false) {
				out = append(out, c.Name+": no data yet")
			}
			continue
		}
		class := classes[i/copies]
		if class.slowTemplate && dataCond != nil && dataCond.Reason == bootstrapv1.KubeadmConfigFileTemplateFailedReason && strings.Contains(dataCond.Message, "runs too long") {
			class.reason, class.bound, class.at = dataCond.Reason, "runs too long", []string{"spec.files[0]", "spec.files[1]"}
		}
		switch {
		case dataCond == nil || dataCond.Reason != class.reason:
			out = append(out, fmt.Sprintf("%s (%s): condition %v, want reason %s", c.Name, class.name, dataCond, class.reason))
		case !slices.ContainsFunc(class.at, func(at string) bool { return strings.HasPrefix(dataCond.Message, at+":") }),
			!strings.Contains(dataCond.Message, class.bound):
			out = append(out, fmt.Sprintf("%s (%s): message %q, want one of %v and %q", c.Name, class.name, dataCond.Message, class.at, class.bound))
		case strings.Contains(dataCond.Message, hostileMarker):
			f.t.Errorf("%s (%s): the condition quotes content: %q", c.Name, class.name, dataCond.Message)
		}
	}
	return out
}

// shippedMemoryLimit is the manager container's memory limit in the
// release's manifests (its clusterctl variable's default).
func shippedMemoryLimit(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(testenv.RepoRoot() + "/bootstrap/kubeadm/config/manager/manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`KUBEADM_BOOTSTRAP_MEMORY_LIMIT:=(\d+)Mi\}`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no default memory limit in the manager's manifest")
	}
	mib, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return mib << 20
}
