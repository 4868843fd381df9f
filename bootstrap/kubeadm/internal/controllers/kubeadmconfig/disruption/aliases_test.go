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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/hostile"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlsize"
)

// aliasBomb is 30 KiB of YAML (within the documents' 32 KiB limit) that
// expands to 2.7 GB and passes yaml.v2's own alias guard: without the bound,
// one dry-run create of a document like it took a manager to 5.2 GB.
var aliasBomb = hostile.AliasBomb(14<<10, 100, 1900)

// aliasRequest is one object carrying aliasBomb, and the field its refusal
// must name once the Ignition gate is on.
type aliasRequest struct {
	name string
	obj  func() client.Object
	at   string
}

func (f *fixture) aliasRequests() []aliasRequest {
	config := func(annotations map[string]string, spec bootstrapv1.KubeadmConfigSpec) func() client.Object {
		return func() client.Object {
			return &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{GenerateName: "aliases-", Namespace: f.ns, Annotations: annotations}, Spec: spec}
		}
	}
	ignition := func(ign bootstrapv1.IgnitionSpec) bootstrapv1.KubeadmConfigSpec {
		return bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.Ignition, Ignition: ign}
	}
	annotations := map[string]string{bootstrapv1.FormatAnnotation: string(bootstrapv1.Ignition), bootstrapv1.IgnitionButaneAnnotation: aliasBomb}
	kcp := func() client.Object {
		return &controlplanev1.KubeadmControlPlane{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "aliases-", Namespace: f.ns},
			Spec: controlplanev1.KubeadmControlPlaneSpec{
				Version: kubernetesVersion,
				MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
					ObjectMeta: clusterv1.ObjectMeta{Annotations: annotations},
					Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachineTemplate", Name: "cp"}},
				},
			},
		}
	}
	return []aliasRequest{
		{"Butane", config(nil, ignition(bootstrapv1.IgnitionSpec{Butane: bootstrapv1.ButaneConfig{AdditionalConfig: aliasBomb}})), "spec.ignition.butane.additionalConfig"},
		{"Container Linux Config", config(nil, ignition(bootstrapv1.IgnitionSpec{ContainerLinuxConfig: upstreambootstrapv1.ContainerLinuxConfig{AdditionalConfig: aliasBomb}})),
			"spec.ignition.containerLinuxConfig.additionalConfig"},
		{"Butane annotation", config(annotations, bootstrapv1.KubeadmConfigSpec{}), "metadata.annotations[" + bootstrapv1.IgnitionButaneAnnotation + "]"},
		// KubeadmControlPlane's webhook fails open: a refusal is the proof
		// that it answered in time.
		{"KubeadmControlPlane annotation", kcp, "spec.machineTemplate.metadata.annotations[" + bootstrapv1.IgnitionButaneAnnotation + "]"},
	}
}

// TestAliasDocumentsUnderTheShippedLimit: the manager binary serves
// admission as its Deployment does, at the shipped memory limit. Each way a
// tenant can hand it a Butane or Container Linux Config document (the spec,
// the KubeadmConfig annotation, a KubeadmControlPlane's machine template
// annotations) is sent four times at once with a document that expands to
// 2.7 GB, by server-side dry-run creates: with the Ignition gate off (as
// installed) each is refused for the gate; with it on, each is refused at its
// field with the bound. A KubeadmConfig stored with such a document before
// the bound existed gets a condition naming the field and the bound. The
// manager is never killed and stays within a few hundred MiB.
func TestAliasDocumentsUnderTheShippedLimit(t *testing.T) {
	f := newFixture(t, "aliases", true)
	f.stopWebhooks() // the manager binary serves them
	limit := shippedMemoryLimit(t)
	requests := f.aliasRequests()

	for _, gateOn := range []bool{false, true} {
		t.Logf("the Ignition gate on: %v", gateOn)
		m := f.startAdmissionManager(limit, gateOn)
		for _, req := range requests {
			want := []string{"KubeadmBootstrapFormatIgnition"}
			if gateOn {
				want = []string{req.at, strconv.Itoa(yamlsize.ExtraIgnitionConfig)}
			}
			f.expectRefusedFourTimes(req, want)
		}
		if gateOn {
			f.expectStoredAliasesGetACondition()
		}
		if m.Exited() {
			t.Fatalf("the manager was killed (over its %d MiB limit?); the end of its log:\n%s", limit>>20, m.LogTail())
		}
		peak, err := m.PeakMemory()
		f.must(err)
		t.Logf("the manager's peak memory: %d MiB of its %d MiB", peak>>20, limit>>20)
		if peak > 300<<20 {
			t.Errorf("the manager's memory peaked at %d MiB", peak>>20)
		}
		m.Stop()
	}
}

// startAdmissionManager runs the manager binary where the API server calls
// admission, with the Ignition gate as said, in a memory cgroup at limit.
func (f *fixture) startAdmissionManager(limit int64, ignition bool) *process.Manager {
	f.t.Helper()
	kubeconfig, err := f.env.ManagerKubeconfig()
	f.must(err)
	args := []string{"--namespace=" + f.ns}
	if ignition {
		args = append(args, "--feature-gates=KubeadmBootstrapFormatIgnition=true")
	}
	hooks := f.env.Webhooks()
	m := process.StartManager(f.t, process.ManagerOptions{
		Binary: managerBinary, Name: fmt.Sprintf("admission-ignition-%v", ignition), Kubeconfig: kubeconfig,
		WebhookCertDir: hooks.CertDir, WebhookPort: hooks.Port, Args: args, MemoryLimit: limit,
	})
	f.must(testenv.WaitForTLS(hooks.Address(), 30*time.Second))
	return m
}

// expectRefusedFourTimes sends req's object four times at once by
// server-side dry-run create; each must be refused, naming every want,
// quoting nothing of the document, within the webhook's timeout.
func (f *fixture) expectRefusedFourTimes(req aliasRequest, want []string) {
	f.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	start := time.Now()
	for i := range errs {
		wg.Go(func() { errs[i] = f.client().Create(f.ctx, req.obj(), client.DryRunAll) })
	}
	wg.Wait()
	took := time.Since(start)
	for _, err := range errs {
		if err == nil {
			f.t.Fatalf("%s: admitted (a webhook that fails open times out the same way)", req.name)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				f.t.Fatalf("%s: refused with %q, want it to name %q", req.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "xxxx") {
			f.t.Errorf("%s: the refusal quotes the document", req.name)
		}
	}
	f.t.Logf("%s: refused four times in %s", req.name, took.Round(time.Millisecond))
	if took > 5*time.Second {
		f.t.Errorf("%s: refusing took %s", req.name, took)
	}
}

// expectStoredAliasesGetACondition stores, with admission set aside as on
// an install from before the bound, a worker's KubeadmConfig carrying the
// document, and waits for the controller's condition.
func (f *fixture) expectStoredAliasesGetACondition() {
	f.t.Helper()
	spec := bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.Ignition, Ignition: bootstrapv1.IgnitionSpec{Butane: bootstrapv1.ButaneConfig{AdditionalConfig: aliasBomb}}}
	f.withoutAdmission(func() { f.must(f.createWorker("stored-aliases", spec)) })
	cfg := &bootstrapv1.KubeadmConfig{}
	var msg string
	for deadline := time.Now().Add(time.Minute); msg == ""; time.Sleep(200 * time.Millisecond) {
		f.must(f.client().Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "stored-aliases"}, cfg))
		if c := conditions.Get(cfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition); c != nil && c.Reason == bootstrapv1.KubeadmConfigRenderFailedReason {
			msg = c.Message
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("no RenderFailed condition on the stored KubeadmConfig after a minute: %+v", cfg.Status.Conditions)
		}
	}
	for _, w := range []string{"spec.ignition.butane.additionalConfig", strconv.Itoa(yamlsize.ExtraIgnitionConfig)} {
		if !strings.Contains(msg, w) {
			f.t.Errorf("condition %q does not name %q", msg, w)
		}
	}
	if ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) {
		f.t.Error("the stored KubeadmConfig got data")
	}
}

// withoutAdmission runs do while the API server calls no validating webhook
// of this provider, and puts them back.
func (f *fixture) withoutAdmission(do func()) {
	f.t.Helper()
	hooks := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	f.must(f.client().List(f.ctx, hooks))
	for i := range hooks.Items {
		f.must(f.client().Delete(f.ctx, &hooks.Items[i]))
	}
	defer func() {
		for _, h := range hooks.Items {
			h.ResourceVersion, h.UID, h.Generation, h.CreationTimestamp, h.ManagedFields = "", "", 0, metav1.Time{}, nil
			f.must(f.client().Create(f.ctx, &h))
		}
	}()
	do()
}
