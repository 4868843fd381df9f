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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// kcpManager is the field manager KubeadmControlPlane writes its machines'
// KubeadmConfigs with (server-side apply).
const kcpManager = "capi-kubeadmcontrolplane"

// TestInPlaceUpdateLeavesJoinedMachinesAlone: KubeadmControlPlane writes
// its control-plane machines' KubeadmConfigs as it does for an in-place
// update (server-side apply of the desired spec with the update-in-progress
// annotation: discovery left out, new files and API server flags, the
// kubeadm-init machine's config turned into a join configuration), for a
// machine of each format. Admission accepts the writes and the controller
// renders nothing again: the data secrets stay as they were, no bootstrap
// token is made, and Ready stays True throughout.
func TestInPlaceUpdateLeavesJoinedMachinesAlone(t *testing.T) {
	startManager(t)
	for _, tc := range []struct {
		name       string
		format     bootstrapv1.Format
		annotation bool // raw control planes are chosen by the annotation
	}{
		{name: "cloud-config", format: bootstrapv1.CloudConfig},
		{name: "ignition", format: bootstrapv1.Ignition},
		{name: "raw (annotation)", format: bootstrapv1.Raw, annotation: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.clusterCertificates()
			f.setClusterStatus(true, false)
			first := f.kcpMachine("cp-0", tc.format, tc.annotation, true)
			f.waitForData(first.config)
			f.setClusterStatus(true, true)
			second := f.kcpMachine("cp-1", tc.format, tc.annotation, false)
			f.waitForData(second.config)
			for _, m := range []kcpMachine{first, second} {
				f.setNodeRef(m.machine, m.machine.Name)
			}
			f.waitFor("the joined machine's token to go", 20*time.Second, func() bool { return len(tokensOf(t, second.config)) == 0 })

			before := map[string]*corev1.Secret{}
			for _, m := range []kcpMachine{first, second} {
				f.get(m.config)
				before[m.config.Name] = f.dataSecret(m.config)
				if got := bootstrapv1.Format(before[m.config.Name].Data["format"]); got != tc.format {
					t.Fatalf("%s: data rendered as %q, want %q", m.config.Name, got, tc.format)
				}
			}
			generations := map[string]int64{first.config.Name: first.config.Generation, second.config.Name: second.config.Generation}
			stopWatch := f.watchReady(first.config, second.config)

			// KCP's trigger: the desired config with the update-in-progress
			// annotation; the first machine's becomes a join configuration.
			for _, m := range []kcpMachine{first, second} {
				spec := kcpJoinSpec(tc.format, m.config.Name)
				spec.Files = []upstreambootstrapv1.File{{Path: "/etc/in-place", Content: "updated", Permissions: "0600"}}
				spec.ClusterConfiguration.APIServer.ExtraArgs = []upstreambootstrapv1.Arg{{Name: "audit-log-maxage", Value: ptr.To("7")}}
				f.applyAsKCP(m.config.Name, spec, map[string]string{clusterv1.UpdateInProgressAnnotation: ""})
			}
			time.Sleep(3 * time.Second)
			// Then the Machine controller's end of the update: the
			// annotation goes.
			for _, m := range []kcpMachine{first, second} {
				f.get(m.config)
				orig := m.config.DeepCopy()
				delete(m.config.Annotations, clusterv1.UpdateInProgressAnnotation)
				if err := mgmt.Client.Patch(f.ctx, m.config, client.MergeFrom(orig)); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(3 * time.Second)
			stopWatch()

			for _, m := range []kcpMachine{first, second} {
				f.get(m.config)
				if m.config.Generation == generations[m.config.Name] || m.config.Spec.InitConfiguration.IsDefined() || len(m.config.Spec.Files) != 1 {
					t.Errorf("%s: the in-place spec was not kept: %+v", m.config.Name, m.config.Spec)
				}
				after := f.dataSecret(m.config)
				if after.Name != before[m.config.Name].Name || after.ResourceVersion != before[m.config.Name].ResourceVersion {
					t.Errorf("%s: its data secret was written again (%s@%s, before %s@%s)", m.config.Name,
						after.Name, after.ResourceVersion, before[m.config.Name].Name, before[m.config.Name].ResourceVersion)
				}
				if n := len(tokensOf(t, m.config)); n != 0 {
					t.Errorf("%s: %d bootstrap tokens made for a machine that had joined", m.config.Name, n)
				}
				if m.config.Spec.JoinConfiguration.Discovery.BootstrapToken.Token != "" && m.config.Name == first.config.Name {
					t.Errorf("%s: a token was written into the former init machine's spec", m.config.Name)
				}
			}
		})
	}
}

// kcpMachine is a control-plane Machine and its KubeadmConfig, written as
// KubeadmControlPlane writes them.
type kcpMachine struct {
	machine *clusterv1.Machine
	config  *bootstrapv1.KubeadmConfig
}

// kcpMachine creates a control-plane Machine and applies its KubeadmConfig
// as KCP does: upstream's type, KCP's field manager, the machine template's
// annotations; an init configuration for the first machine.
func (f *fixture) kcpMachine(name string, format bootstrapv1.Format, annotation, init bool) kcpMachine {
	f.t.Helper()
	m := f.newMachine(name, true)
	f.create(m)
	spec := kcpJoinSpec(format, name)
	if init {
		spec.JoinConfiguration = upstreambootstrapv1.JoinConfiguration{}
		spec.InitConfiguration.NodeRegistration.Name = name
	}
	var annotations map[string]string
	if annotation {
		annotations = map[string]string{bootstrapv1.FormatAnnotation: string(format)}
	}
	f.applyAsKCP(name, spec, annotations, metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID, Controller: ptr.To(true),
	})
	cfg := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}}
	f.get(cfg)
	return kcpMachine{machine: m, config: cfg}
}

// kcpJoinSpec is a control plane's join spec in upstream's type, as KCP
// computes it: no discovery; format in the spec unless raw (the annotation).
func kcpJoinSpec(format bootstrapv1.Format, name string) upstreambootstrapv1.KubeadmConfigSpec {
	spec := upstreambootstrapv1.KubeadmConfigSpec{}
	if format != bootstrapv1.Raw {
		spec.Format = upstreambootstrapv1.Format(format)
	}
	spec.ClusterConfiguration.APIServer.CertSANs = []string{"localhost"}
	spec.JoinConfiguration.NodeRegistration.Name = name
	spec.JoinConfiguration.ControlPlane = &upstreambootstrapv1.JoinControlPlane{}
	return spec
}

// applyAsKCP server-side applies a KubeadmConfig of upstream's type with
// KCP's field manager.
func (f *fixture) applyAsKCP(name string, spec upstreambootstrapv1.KubeadmConfigSpec, annotations map[string]string, owners ...metav1.OwnerReference) {
	f.t.Helper()
	cfg := &upstreambootstrapv1.KubeadmConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: upstreambootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Annotations: annotations, OwnerReferences: owners,
			Labels: map[string]string{clusterv1.ClusterNameLabel: f.cluster.Name, clusterv1.MachineControlPlaneLabel: ""}},
		Spec: spec,
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	//nolint:staticcheck // Cluster API's ssa.Patch applies with client.Apply too.
	if err := mgmt.Client.Patch(f.ctx, u, client.Apply, client.FieldOwner(kcpManager), client.ForceOwnership); err != nil {
		f.t.Fatalf("applying %s as KubeadmControlPlane does: %v", name, err)
	}
}

// watchReady polls the configs' Ready condition until stopped, failing the
// test if it is ever other than True.
func (f *fixture) watchReady(configs ...*bootstrapv1.KubeadmConfig) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			for _, c := range configs {
				cfg := &bootstrapv1.KubeadmConfig{}
				if err := mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(c), cfg); err == nil {
					if r := conditions.Get(cfg, clusterv1.ReadyCondition); r == nil || r.Status != metav1.ConditionTrue {
						f.t.Errorf("%s: Ready is %+v during the in-place update", c.Name, r)
						return
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-stopped }
}
