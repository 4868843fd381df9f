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
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/webhooks"
)

// A KubeadmControlPlane's Kubernetes version is refused outside the
// supported range, with the range in the message, when it is created and
// when an update changes it.
func TestKubeadmControlPlaneVersionIsSupported(t *testing.T) {
	ctx := context.Background()
	setGates(t, false, false)
	for _, version := range []string{"v1.30.14", "v1.38.0"} {
		k := kcp(nil)
		k.Spec.Version = version
		err := env.Client.Create(ctx, k)
		if err == nil || !strings.Contains(err.Error(), "spec.version") || !strings.Contains(err.Error(), "v1.31 to v1.37") {
			t.Fatalf("a KubeadmControlPlane at %s: %v", version, err)
		}
	}
	k := kcp(nil)
	k.Spec.Version = "v1.31.14"
	if err := env.Client.Create(ctx, k); err != nil {
		t.Fatalf("a KubeadmControlPlane at the oldest supported minor: %v", err)
	}
	patch := client.MergeFrom(k.DeepCopy())
	k.Spec.Version = "v1.32.13"
	if err := env.Client.Patch(ctx, k, patch); err != nil {
		t.Fatalf("an upgrade inside the range: %v", err)
	}
	patch = client.MergeFrom(k.DeepCopy())
	k.Spec.Version = "v1.38.0"
	if err := env.Client.Patch(ctx, k, patch); err == nil || !strings.Contains(err.Error(), "v1.31 to v1.37") {
		t.Fatalf("an upgrade out of the range: %v", err)
	}
}

// A KubeadmControlPlane stored at an older version (made before this
// provider, or with upstream's) stays writable, and may be upgraded into
// the range; an update that keeps it out of the range by changing the
// version is refused.
func TestKubeadmControlPlaneOutsideTheRangeRatchets(t *testing.T) {
	w := &webhooks.KubeadmControlPlaneBootstrap{Gates: gates}
	old := kcp(nil)
	old.Spec.Version = "v1.30.14"
	update := func(change func(*controlplanev1.KubeadmControlPlane)) admission.Response {
		updated := old.DeepCopy()
		change(updated)
		return w.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Kind: metav1.GroupVersionKind{Kind: "KubeadmControlPlane"}, Name: old.Name, Operation: admissionv1.Update,
			Object: rawObject(t, updated), OldObject: rawObject(t, old),
		}})
	}
	if r := update(func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Replicas = ptr.To[int32](3) }); !r.Allowed {
		t.Errorf("scaling a KubeadmControlPlane at v1.30: %s", r.Result.Message)
	}
	if r := update(func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Version = "v1.31.14" }); !r.Allowed {
		t.Errorf("upgrading it into the range: %s", r.Result.Message)
	}
	if r := update(func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Version = "v1.30.15" }); r.Allowed || !strings.Contains(r.Result.Message, "v1.31 to v1.37") {
		t.Errorf("a patch release outside the range: allowed %v, %s", r.Allowed, r.Result.Message)
	}
}

func rawObject(t *testing.T, o any) runtime.RawExtension {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: raw}
}
