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

package webhooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// The format annotation (what KubeadmControlPlane copies from its machine
// template) decides what a KubeadmConfig renders, through the same gates
// and rules, reported at the annotation.
func TestFormatAnnotationOnKubeadmConfig(t *testing.T) {
	ctx := context.Background()
	annotated := func(spec bootstrapv1.Format, annotation string) *bootstrapv1.KubeadmConfig {
		c := config(spec)
		c.Annotations = map[string]string{bootstrapv1.FormatAnnotation: annotation}
		return c
	}
	at := fmt.Sprintf("metadata.annotations[%s]", bootstrapv1.FormatAnnotation)

	setGates(t, false, false)
	err := env.Client.Create(ctx, annotated(bootstrapv1.CloudConfig, "raw"))
	if got := causes(t, err); len(got) != 1 || got[0] != at || !strings.Contains(err.Error(), "KubeadmBootstrapFormatRaw") {
		t.Fatalf("raw by annotation with its gate off: %v", err)
	}

	setGates(t, false, true)
	if err := env.Client.Create(ctx, annotated(bootstrapv1.CloudConfig, "raw")); err != nil {
		t.Fatalf("raw by annotation over KCP's default: %v", err)
	}
	c := annotated(bootstrapv1.CloudConfig, "raw")
	c.Spec.PreKubeadmCommands = []string{"echo hi"}
	err = env.Client.Create(ctx, c)
	if got := causes(t, err); len(got) != 1 || got[0] != "spec.preKubeadmCommands" || !strings.Contains(err.Error(), bootstrapv1.FormatAnnotation) {
		t.Fatalf("a field raw does not take, raw by annotation: %v", err)
	}

	setGates(t, true, true)
	err = env.Client.Create(ctx, annotated(bootstrapv1.Ignition, "raw"))
	if got := causes(t, err); len(got) != 1 || got[0] != at || !strings.Contains(err.Error(), "contradicts") {
		t.Fatalf("an annotation contradicting spec.format: %v", err)
	}

	// KubeadmControlPlane writes its machine template's new annotations
	// onto the configs of machines that await their rollout: once the data
	// secret exists the annotations choose nothing, and the update passes.
	rendered := config(bootstrapv1.Ignition)
	if err := env.Client.Create(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	contradict := func() error {
		rendered.Annotations = map[string]string{bootstrapv1.FormatAnnotation: "raw"}
		return env.Client.Update(ctx, rendered)
	}
	err = contradict()
	if got := causes(t, err); len(got) != 1 || got[0] != at {
		t.Fatalf("a contradicting annotation before the data secret exists: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rendered), rendered); err != nil {
		t.Fatal(err)
	}
	rendered.Status.DataSecretName = rendered.Name
	rendered.Status.Initialization.DataSecretCreated = ptr.To(true)
	if err := env.Client.Status().Update(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	if err := contradict(); err != nil {
		t.Fatalf("a new annotation on a config whose data secret exists: %v", err)
	}
}

func kcp(annotations map[string]string) *controlplanev1.KubeadmControlPlane {
	nameSeq++
	k := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kcp-%d", nameSeq), Namespace: "default"},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](1),
			Version:  "v1.36.3",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				ObjectMeta: clusterv1.ObjectMeta{Annotations: annotations},
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "ExampleMachineTemplate", Name: "cp"}},
			},
		}}
	k.Spec.KubeadmConfigSpec.Format = "cloud-config" // what KCP's own defaulting writes
	return k
}

// A KubeadmControlPlane is refused at admission when the KubeadmConfigs it
// would create would be: the gate of the format its annotation chooses, a
// field that format does not take, a contradiction, all at the KCP's
// fields. Updates that leave what it renders alone pass even when the rules
// would refuse it now.
func TestKubeadmControlPlaneIsCheckedForItsFormat(t *testing.T) {
	ctx := context.Background()
	raw := map[string]string{bootstrapv1.FormatAnnotation: "raw"}
	at := fmt.Sprintf("spec.machineTemplate.metadata.annotations[%s]", bootstrapv1.FormatAnnotation)

	setGates(t, false, false)
	err := env.Client.Create(ctx, kcp(raw))
	if err == nil || !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), "KubeadmBootstrapFormatRaw") {
		t.Fatalf("raw with its gate off: %v", err)
	}

	setGates(t, false, true)
	k := kcp(raw)
	k.Spec.KubeadmConfigSpec.PostKubeadmCommands = []string{"echo hi"}
	err = env.Client.Create(ctx, k)
	if err == nil || !strings.Contains(err.Error(), "spec.kubeadmConfigSpec.postKubeadmCommands") {
		t.Fatalf("a field raw does not take: %v", err)
	}
	k = kcp(map[string]string{bootstrapv1.FormatAnnotation: "raw"})
	k.Spec.KubeadmConfigSpec.Format = "ignition"
	err = env.Client.Create(ctx, k)
	if err == nil || !strings.Contains(err.Error(), "contradicts") {
		t.Fatalf("a contradiction: %v", err)
	}
	good := kcp(raw)
	if err := env.Client.Create(ctx, good); err != nil {
		t.Fatalf("a raw KubeadmControlPlane: %v", err)
	}

	// The gate goes off afterwards: scaling what exists still works...
	setGates(t, false, false)
	patch := client.MergeFrom(good.DeepCopy())
	good.Spec.Replicas = ptr.To[int32](3)
	if err := env.Client.Patch(ctx, good, patch); err != nil {
		t.Fatalf("scaling an admitted KubeadmControlPlane: %v", err)
	}
	// ...and so does changing what the refusal is not about (updates
	// ratchet: only what an update changes is judged)...
	patch = client.MergeFrom(good.DeepCopy())
	good.Spec.KubeadmConfigSpec.JoinConfiguration.NodeRegistration.Name = "changed"
	if err := env.Client.Patch(ctx, good, patch); err != nil {
		t.Fatalf("changing an unrelated field with raw's gate off: %v", err)
	}
	// ...while what the update brings is judged in full.
	patch = client.MergeFrom(good.DeepCopy())
	good.Spec.MachineTemplate.ObjectMeta.Annotations = map[string]string{bootstrapv1.FormatAnnotation: "ignition"}
	if err := env.Client.Patch(ctx, good, patch); err == nil || !strings.Contains(err.Error(), "KubeadmBootstrapFormatIgnition") {
		t.Fatalf("changing to a gated format: %v", err)
	}
	setGates(t, false, true)
	good.Spec.MachineTemplate.ObjectMeta.Annotations = raw
	patch = client.MergeFrom(good.DeepCopy())
	good.Spec.KubeadmConfigSpec.PostKubeadmCommands = []string{"echo hi"}
	if err := env.Client.Patch(ctx, good, patch); err == nil || !strings.Contains(err.Error(), "spec.kubeadmConfigSpec.postKubeadmCommands") {
		t.Fatalf("adding a field raw does not take: %v", err)
	}
}

// TestWhileTheManagerIsDown: with no webhook server answering (the manager
// down, or between its replicas), KubeadmControlPlanes stay writable (KCP's
// own finalizer and scale patches, clusterctl move): their check only
// reports early what the KubeadmConfig webhook refuses anyway, and that one
// stays closed, so nothing unchecked renders.
func TestWhileTheManagerIsDown(t *testing.T) {
	ctx := context.Background()
	down := testenv.Start(t, testenv.Options{WithWebhooks: true, WithClusterAPI: true})
	k := kcp(map[string]string{bootstrapv1.FormatAnnotation: "raw"})
	if err := down.Client.Create(ctx, k); err != nil {
		t.Fatalf("creating a KubeadmControlPlane: %v", err)
	}
	patch := client.MergeFrom(k.DeepCopy())
	k.Finalizers = append(k.Finalizers, "kubeadm.controlplane.cluster.x-k8s.io")
	if err := down.Client.Patch(ctx, k, patch); err != nil {
		t.Fatalf("KCP's finalizer patch: %v", err)
	}
	if err := down.Client.Create(ctx, config(bootstrapv1.CloudConfig)); err == nil {
		t.Fatal("a KubeadmConfig was admitted with no webhook to check it")
	}
}
