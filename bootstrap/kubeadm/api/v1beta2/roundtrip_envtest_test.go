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

package v1beta2_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// specFor returns a spec that exercises the fields a format supports.
func specFor(format bootstrapv1.Format) bootstrapv1.KubeadmConfigSpec {
	spec := bootstrapv1.KubeadmConfigSpec{
		Format: format,
		ClusterConfiguration: upstreambootstrapv1.ClusterConfiguration{
			ControlPlaneEndpoint: "10.0.0.1:6443",
			APIServer: upstreambootstrapv1.APIServer{
				ExtraArgs: []upstreambootstrapv1.Arg{{Name: "audit-log-maxage", Value: ptr.To("30")}},
				CertSANs:  []string{"api.example.com"},
			},
		},
		InitConfiguration: upstreambootstrapv1.InitConfiguration{
			NodeRegistration: upstreambootstrapv1.NodeRegistrationOptions{
				Name:             "node-a",
				KubeletExtraArgs: []upstreambootstrapv1.Arg{{Name: "node-labels", Value: ptr.To("role=cp")}},
			},
		},
	}
	if format == bootstrapv1.Raw {
		return spec
	}
	spec.Files = []upstreambootstrapv1.File{
		{Path: "/etc/motd", Content: "hello", Permissions: "0644", Owner: "root:root"},
		{Path: "/etc/secret", ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "s", Key: "k"}}},
	}
	spec.PreKubeadmCommands = []string{"echo pre"}
	spec.PostKubeadmCommands = []string{"echo post"}
	spec.Users = []upstreambootstrapv1.User{{Name: "ops", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAA ops"}, Sudo: "ALL=(ALL) NOPASSWD:ALL"}}
	spec.NTP = upstreambootstrapv1.NTP{Enabled: ptr.To(true), Servers: []string{"time.example.com"}}
	spec.Mounts = []upstreambootstrapv1.MountPoints{{"/dev/sdb1", "/data"}}
	spec.Verbosity = ptr.To[int32](5)
	if format == bootstrapv1.Ignition {
		spec.Ignition = bootstrapv1.IgnitionSpec{Butane: bootstrapv1.ButaneConfig{
			AdditionalConfig: "variant: flatcar\nversion: 1.1.0\n",
			Strict:           ptr.To(true),
		}}
	} else {
		spec.BootCommands = []string{"echo boot"}
	}
	return spec
}

func TestRoundTripThroughAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client

	for _, format := range []bootstrapv1.Format{"", bootstrapv1.CloudConfig, bootstrapv1.Ignition, bootstrapv1.Raw} {
		name := "config-" + string(format)
		if format == "" {
			name = "config-default"
		}
		t.Run(name, func(t *testing.T) {
			in := &bootstrapv1.KubeadmConfig{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
				Spec:       specFor(format),
			}
			if err := c.Create(ctx, in); err != nil {
				t.Fatalf("create: %v", err)
			}
			out := &bootstrapv1.KubeadmConfig{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(in), out); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(specFor(format), out.Spec); diff != "" {
				t.Fatalf("spec changed in the round trip (-want +got):\n%s", diff)
			}

			// The status subresource carries the v1beta2 contract fields.
			out.Status.Initialization.DataSecretCreated = ptr.To(true)
			out.Status.DataSecretName = name + "-bootstrap"
			out.Status.ObservedGeneration = out.Generation
			out.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
			if err := c.Status().Update(ctx, out); err != nil {
				t.Fatalf("status update: %v", err)
			}
			got := &bootstrapv1.KubeadmConfig{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(in), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.DataSecretName != name+"-bootstrap" || got.Status.Initialization.DataSecretCreated == nil || !*got.Status.Initialization.DataSecretCreated {
				t.Fatalf("status did not round-trip: %+v", got.Status)
			}
		})
	}

	t.Run("template", func(t *testing.T) {
		for _, format := range []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition, bootstrapv1.Raw} {
			in := &bootstrapv1.KubeadmConfigTemplate{
				ObjectMeta: metav1.ObjectMeta{Name: "tmpl-" + string(format), Namespace: "default"},
				Spec: bootstrapv1.KubeadmConfigTemplateSpec{Template: bootstrapv1.KubeadmConfigTemplateResource{
					ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"tier": "workers"}},
					Spec:       specFor(format),
				}},
			}
			if err := c.Create(ctx, in); err != nil {
				t.Fatalf("%s: create: %v", format, err)
			}
			out := &bootstrapv1.KubeadmConfigTemplate{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(in), out); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(in.Spec, out.Spec); diff != "" {
				t.Fatalf("%s: template changed in the round trip (-want +got):\n%s", format, diff)
			}
		}
	})

	t.Run("unknown format is rejected by the API server", func(t *testing.T) {
		for _, kind := range []string{"KubeadmConfig", "KubeadmConfigTemplate"} {
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion(bootstrapv1.GroupVersion.String())
			obj.SetKind(kind)
			obj.SetNamespace("default")
			obj.SetName("bad-format-" + strings.ToLower(kind))
			specPath := []string{"spec", "format"}
			if kind == "KubeadmConfigTemplate" {
				specPath = []string{"spec", "template", "spec", "format"}
			}
			if err := unstructured.SetNestedField(obj.Object, "shell-script", specPath...); err != nil {
				t.Fatal(err)
			}
			err := c.Create(ctx, obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("%s: expected Invalid, got %v", kind, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, strings.Join(specPath, ".")) || !strings.Contains(msg, `"raw"`) {
				t.Fatalf("%s: error should name the field and the supported values: %s", kind, msg)
			}
		}
	})

	t.Run("upstream-typed object is accepted unchanged", func(t *testing.T) {
		// What KubeadmControlPlane or clusterctl would write, typed with upstream's Go API.
		up := &upstreambootstrapv1.KubeadmConfig{
			TypeMeta:   metav1.TypeMeta{APIVersion: upstreambootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig"},
			ObjectMeta: metav1.ObjectMeta{Name: "from-upstream", Namespace: "default"},
			Spec: upstreambootstrapv1.KubeadmConfigSpec{
				Format:             upstreambootstrapv1.Ignition,
				JoinConfiguration:  upstreambootstrapv1.JoinConfiguration{NodeRegistration: upstreambootstrapv1.NodeRegistrationOptions{Name: "w"}},
				Ignition:           upstreambootstrapv1.IgnitionSpec{ContainerLinuxConfig: upstreambootstrapv1.ContainerLinuxConfig{AdditionalConfig: "storage: {}\n", Strict: ptr.To(false)}},
				PreKubeadmCommands: []string{"true"},
			},
		}
		u := &unstructured.Unstructured{}
		var err error
		u.Object, err = runtimeToUnstructured(up)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("upstream object rejected: %v", err)
		}
		back := &upstreambootstrapv1.KubeadmConfig{}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
			t.Fatal(err)
		}
		if err := fromUnstructured(got.Object, back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(up.Spec, back.Spec); diff != "" {
			t.Fatalf("upstream spec changed (-want +got):\n%s", diff)
		}
	})
}

func runtimeToUnstructured(obj any) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

func fromUnstructured(u map[string]any, obj any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj)
}
