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

package claims

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// joined is the spec of a control-plane machine as KCP sends it in a
// CanUpdateMachine request: a join configuration without discovery.
func joined() upstreambootstrapv1.KubeadmConfigSpec {
	return upstreambootstrapv1.KubeadmConfigSpec{
		ClusterConfiguration: upstreambootstrapv1.ClusterConfiguration{
			Etcd: upstreambootstrapv1.Etcd{Local: upstreambootstrapv1.LocalEtcd{DataDir: "/var/lib/etcd"}},
		},
		JoinConfiguration: upstreambootstrapv1.JoinConfiguration{
			NodeRegistration: upstreambootstrapv1.NodeRegistrationOptions{
				KubeletExtraArgs: []upstreambootstrapv1.Arg{{Name: "provider-id", Value: ptr.To("sim://x")}},
			},
			ControlPlane: &upstreambootstrapv1.JoinControlPlane{},
		},
		Files:              []upstreambootstrapv1.File{{Path: "/etc/a", Content: "one"}},
		PreKubeadmCommands: []string{"echo pre"},
	}
}

func config(spec upstreambootstrapv1.KubeadmConfigSpec) runtime.RawExtension {
	return raw(&upstreambootstrapv1.KubeadmConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: upstreambootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"},
		Spec:       spec,
	})
}

func template(spec upstreambootstrapv1.KubeadmConfigSpec) runtime.RawExtension {
	return raw(&upstreambootstrapv1.KubeadmConfigTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: upstreambootstrapv1.GroupVersion.String(), Kind: "KubeadmConfigTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"},
		Spec:       upstreambootstrapv1.KubeadmConfigTemplateSpec{Template: upstreambootstrapv1.KubeadmConfigTemplateResource{Spec: spec}},
	})
}

func raw(obj any) runtime.RawExtension {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: b}
}

// TestClaim applies each claim as Cluster API does (a JSON merge patch on
// the current object) and compares what is left with the desired spec.
func TestClaim(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*upstreambootstrapv1.KubeadmConfigSpec)
		// left is the top-level spec field still different after the
		// claim ("" when the claim covers the change).
		left string
		// partly: a change of which the claim covers a part.
		partly bool
	}{
		{name: "a file's content", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) { s.Files[0].Content = "two" }},
		{name: "a file from a secret", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/b", ContentFrom: upstreambootstrapv1.FileSource{
				Secret: upstreambootstrapv1.SecretFileSource{Name: "s", Key: "k"}}})
		}},
		{name: "a file added", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.Files = append(s.Files, upstreambootstrapv1.File{Path: "/etc/b", Content: "b"})
		}},
		{name: "a file removed", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.Files = []upstreambootstrapv1.File{{Path: "/etc/b", Content: "b"}}
		}, left: "files"},
		{name: "no files at all", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) { s.Files = nil }, left: "files"},
		{name: "API server flags where there was no apiServer", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.ClusterConfiguration.APIServer.ExtraArgs = []upstreambootstrapv1.Arg{{Name: "v", Value: ptr.To("2")}}
		}},
		{name: "scheduler volumes and controller-manager environment", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.ClusterConfiguration.Scheduler.ExtraVolumes = []upstreambootstrapv1.HostPathMount{{Name: "v", HostPath: "/h", MountPath: "/m"}}
			s.ClusterConfiguration.ControllerManager.ExtraEnvs = &[]upstreambootstrapv1.EnvVar{{EnvVar: corev1.EnvVar{Name: "A", Value: "b"}}}
		}},
		{name: "etcd's image tag", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.5-0"
		}},
		{name: "kubelet flags removed", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.JoinConfiguration.NodeRegistration.KubeletExtraArgs = nil
		}},
		{name: "etcd's data directory", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.ClusterConfiguration.Etcd.Local.DataDir = "/data/etcd"
		}, left: "clusterConfiguration"},
		{name: "node taints", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.JoinConfiguration.NodeRegistration.Taints = &[]corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		}, left: "joinConfiguration"},
		{name: "pre-kubeadm commands", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) { s.PreKubeadmCommands = []string{"echo other"} }, left: "preKubeadmCommands"},
		{name: "mounts", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.Mounts = []upstreambootstrapv1.MountPoints{{"LABEL=data", "/data"}}
		}, left: "mounts"},
		{name: "users", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) { s.Users = []upstreambootstrapv1.User{{Name: "jane"}} }, left: "users"},
		{name: "a file and the disks", change: func(s *upstreambootstrapv1.KubeadmConfigSpec) {
			s.Files[0].Content = "two"
			s.DiskSetup.Filesystems = []upstreambootstrapv1.Filesystem{{Device: "/dev/sdb", Filesystem: "ext4"}}
		}, left: "diskSetup", partly: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired := joined()
			tc.change(&desired)
			for _, in := range []struct {
				kind             string
				current, desired runtime.RawExtension
				spec             []string
			}{
				{"KubeadmConfig", config(joined()), config(desired), ConfigSpec},
				{"KubeadmConfigTemplate", template(joined()), template(desired), TemplateSpec},
			} {
				patch, err := Claim(in.current, in.desired, in.spec, "")
				if err != nil {
					t.Fatalf("%s: %v", in.kind, err)
				}
				if left := leftAfter(t, in.current, in.desired, patch, in.spec); left != tc.left {
					t.Errorf("%s: after the claim %s, %q differs, want %q", in.kind, patch.Patch, left, tc.left)
				}
				if tc.left != "" && !tc.partly && patch.IsDefined() {
					t.Errorf("%s: claimed %s for a change that cannot be made in place", in.kind, patch.Patch)
				}
			}
		})
	}
}

// TestNothingToClaim: equal specs give no patch.
func TestNothingToClaim(t *testing.T) {
	patch, err := Claim(config(joined()), config(joined()), ConfigSpec, "")
	if err != nil || patch.IsDefined() {
		t.Errorf("equal specs: patch %s, err %v", patch.Patch, err)
	}
}

// leftAfter applies patch to current and returns the one top-level spec
// field that still differs from desired ("" for none, "many" for more).
func leftAfter(t *testing.T, current, desired runtime.RawExtension, patch runtimehooksv1.Patch, spec []string) string {
	t.Helper()
	patched := current.Raw
	if patch.IsDefined() {
		if patch.PatchType != runtimehooksv1.JSONMergePatchType {
			t.Fatalf("patch type %s", patch.PatchType)
		}
		var err error
		if patched, err = jsonpatch.MergePatch(current.Raw, patch.Patch); err != nil {
			t.Fatalf("applying %s: %v", patch.Patch, err)
		}
	}
	got, err := specOf(patched, spec)
	if err != nil {
		t.Fatal(err)
	}
	want, err := specOf(desired.Raw, spec)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for k := range merged(got, want) {
		if !reflect.DeepEqual(got[k], want[k]) {
			left = append(left, k)
		}
	}
	switch len(left) {
	case 0:
		return ""
	case 1:
		return left[0]
	}
	return "many"
}

func merged(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
