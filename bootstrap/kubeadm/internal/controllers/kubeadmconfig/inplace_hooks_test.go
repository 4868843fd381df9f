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
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/updateextension"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/runtimehook"
)

// inPlaceFlags turn in-place updates on in a test manager.
var inPlaceFlags = []string{
	"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true,KubeadmInPlaceUpdates=true",
	"--node-update-image=" + nodeUpdateImage,
}

// TestInPlaceHooksServedBesideAdmission: with KubeadmInPlaceUpdates on, the
// manager's webhook server answers Cluster API's Runtime discovery with the
// in-place hooks, over the TLS the API server trusts, while admission keeps
// working on the same port. CanUpdateMachine and CanUpdateMachineSet claim a
// change of files and API server flags, so that the current object patched
// as Cluster API patches it equals the desired one, and leave a format
// change unclaimed.
func TestInPlaceHooksServedBesideAdmission(t *testing.T) {
	startManager(t, inPlaceFlags...)
	f := newFixture(t)

	// Admission, on the same server.
	bad := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: f.ns}}
	bad.Spec.Format = bootstrapv1.CloudConfig
	bad.Spec.Ignition.ContainerLinuxConfig.AdditionalConfig = "storage: {}"
	if err := mgmt.Client.Create(f.ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.ignition") {
		t.Fatalf("admission of an Ignition field on cloud-config: got %v, want a rejection naming spec.ignition", err)
	}

	var discovery runtimehooksv1.DiscoveryResponse
	callHook(t, runtimehooksv1.Discovery, "", &runtimehooksv1.DiscoveryRequest{}, &discovery)
	var names []string
	for _, h := range discovery.Handlers {
		names = append(names, h.Name+"/"+h.RequestHook.Hook)
	}
	slices.Sort(names)
	if want := []string{updateextension.CanUpdateMachineName + "/CanUpdateMachine", updateextension.CanUpdateMachineSetName + "/CanUpdateMachineSet", updateextension.UpdateMachineName + "/UpdateMachine"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("discovery lists %v, want %v", names, want)
	}

	current := kcpJoinSpec(bootstrapv1.CloudConfig, "cp-0")
	current.Files = []upstreambootstrapv1.File{{Path: "/etc/a", Content: "one"}}
	desired := *current.DeepCopy()
	desired.Files = []upstreambootstrapv1.File{{Path: "/etc/a", Content: "two", Permissions: "0600"}, {Path: "/etc/b", Content: "new"}}
	desired.ClusterConfiguration.APIServer.ExtraArgs = []upstreambootstrapv1.Arg{{Name: "audit-log-maxage", Value: ptr.To("7")}}
	reformatted := *desired.DeepCopy()
	reformatted.Format = upstreambootstrapv1.Format(bootstrapv1.Ignition)

	// What the claim leaves: nothing, or the format (the machine rolls out).
	formatLeft := *reformatted.DeepCopy()
	formatLeft.Format = current.Format
	for _, tc := range []struct {
		name        string
		desired     upstreambootstrapv1.KubeadmConfigSpec
		wantPatched upstreambootstrapv1.KubeadmConfigSpec
	}{
		{name: "files and API server flags", desired: desired, wantPatched: desired},
		{name: "and the format", desired: reformatted, wantPatched: formatLeft},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp runtimehooksv1.CanUpdateMachineResponse
			callHook(t, runtimehooksv1.CanUpdateMachine, updateextension.CanUpdateMachineName, &runtimehooksv1.CanUpdateMachineRequest{
				Current: runtimehooksv1.CanUpdateMachineRequestObjects{BootstrapConfig: rawObject(configJSON(t, current))},
				Desired: runtimehooksv1.CanUpdateMachineRequestObjects{BootstrapConfig: rawObject(configJSON(t, tc.desired))},
			}, &resp)
			checkClaim(t, resp.CommonResponse, resp.BootstrapConfigPatch, configJSON(t, current), configJSON(t, tc.wantPatched))

			var setResp runtimehooksv1.CanUpdateMachineSetResponse
			callHook(t, runtimehooksv1.CanUpdateMachineSet, updateextension.CanUpdateMachineSetName, &runtimehooksv1.CanUpdateMachineSetRequest{
				Current: runtimehooksv1.CanUpdateMachineSetRequestObjects{BootstrapConfigTemplate: rawObject(templateJSON(t, current))},
				Desired: runtimehooksv1.CanUpdateMachineSetRequestObjects{BootstrapConfigTemplate: rawObject(templateJSON(t, tc.desired))},
			}, &setResp)
			checkClaim(t, setResp.CommonResponse, setResp.BootstrapConfigTemplatePatch, templateJSON(t, current), templateJSON(t, tc.wantPatched))
		})
	}
}

// checkClaim applies a hook's patch to current as Cluster API does for a
// merge patch and compares the result with what the claim should leave.
func checkClaim(t *testing.T, common runtimehooksv1.CommonResponse, p runtimehooksv1.Patch, current, want []byte) {
	t.Helper()
	if common.Status != runtimehooksv1.ResponseStatusSuccess {
		t.Fatalf("hook answered %s: %s", common.Status, common.Message)
	}
	if p.PatchType != runtimehooksv1.JSONMergePatchType {
		t.Fatalf("patch type %q, want %q", p.PatchType, runtimehooksv1.JSONMergePatchType)
	}
	patched, err := jsonpatch.MergePatch(current, p.Patch)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonpatch.Equal(patched, want) {
		t.Errorf("current patched:\n%s\nwant:\n%s", patched, want)
	}
}

func rawObject(b []byte) runtime.RawExtension { return runtime.RawExtension{Raw: b} }

// callHook calls a hook on the manager's webhook port, trusting only the
// certificate authority the API server trusts there.
func callHook(t *testing.T, hook runtimecatalog.Hook, handler string, req, resp any) {
	t.Helper()
	hooks := mgmt.Webhooks()
	if err := runtimehook.Call(hooks.Address(), hooks.CAData, hook, handler, req, resp); err != nil {
		t.Fatal(err)
	}
}

// configJSON and templateJSON are a spec as KubeadmControlPlane and the
// MachineDeployment planner send it: the object in upstream's type.
func configJSON(t *testing.T, spec upstreambootstrapv1.KubeadmConfigSpec) []byte {
	t.Helper()
	return mustJSON(t, &upstreambootstrapv1.KubeadmConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: upstreambootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Namespace: "default"},
		Spec:       spec,
	})
}

func templateJSON(t *testing.T, spec upstreambootstrapv1.KubeadmConfigSpec) []byte {
	t.Helper()
	tmpl := &upstreambootstrapv1.KubeadmConfigTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: upstreambootstrapv1.GroupVersion.String(), Kind: "KubeadmConfigTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "default"},
	}
	tmpl.Spec.Template.Spec = spec
	return mustJSON(t, tmpl)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInPlaceVersionNeedsABinariesSource: a Machine's or MachineSet's
// Kubernetes version (the next minor here) is claimed only by a manager
// that names where nodes get the new version's binaries; without one, the
// version change is left to a rollout.
func TestInPlaceVersionNeedsABinariesSource(t *testing.T) {
	const from, to = "v1.35.8", "v1.36.3"
	config := rawObject(configJSON(t, kcpJoinSpec(bootstrapv1.CloudConfig, "cp-0")))
	tmpl := rawObject(templateJSON(t, kcpJoinSpec(bootstrapv1.CloudConfig, "cp-0")))
	for _, tc := range []struct {
		name  string
		flags []string
		want  bool
	}{
		{"without a source", inPlaceFlags, false},
		{"with a source", append(slices.Clone(inPlaceFlags), "--node-update-kubernetes-binaries=https://dl.k8s.io/release"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := startManager(t, tc.flags...)
			defer stop()
			current, desired := clusterv1.Machine{}, clusterv1.Machine{}
			current.Spec.Version, desired.Spec.Version = from, to
			var resp runtimehooksv1.CanUpdateMachineResponse
			callHook(t, runtimehooksv1.CanUpdateMachine, updateextension.CanUpdateMachineName, &runtimehooksv1.CanUpdateMachineRequest{
				Current: runtimehooksv1.CanUpdateMachineRequestObjects{Machine: current, BootstrapConfig: config},
				Desired: runtimehooksv1.CanUpdateMachineRequestObjects{Machine: desired, BootstrapConfig: config},
			}, &resp)
			if resp.MachinePatch.IsDefined() != tc.want {
				t.Fatalf("Machine version claimed: %v, want %v (%s: %s)", resp.MachinePatch.IsDefined(), tc.want, resp.Status, resp.Message)
			}
			currentSet, desiredSet := clusterv1.MachineSet{}, clusterv1.MachineSet{}
			currentSet.Spec.Template.Spec.Version, desiredSet.Spec.Template.Spec.Version = from, to
			var setResp runtimehooksv1.CanUpdateMachineSetResponse
			callHook(t, runtimehooksv1.CanUpdateMachineSet, updateextension.CanUpdateMachineSetName, &runtimehooksv1.CanUpdateMachineSetRequest{
				Current: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: currentSet, BootstrapConfigTemplate: tmpl},
				Desired: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: desiredSet, BootstrapConfigTemplate: tmpl},
			}, &setResp)
			if setResp.MachineSetPatch.IsDefined() != tc.want {
				t.Fatalf("MachineSet version claimed: %v, want %v (%s: %s)", setResp.MachineSetPatch.IsDefined(), tc.want, setResp.Status, setResp.Message)
			}
			if !tc.want {
				return
			}
			checkClaim(t, resp.CommonResponse, resp.MachinePatch, mustJSON(t, current), mustJSON(t, desired))
			checkClaim(t, setResp.CommonResponse, setResp.MachineSetPatch, mustJSON(t, currentSet), mustJSON(t, desiredSet))
		})
	}
}
