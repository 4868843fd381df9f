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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreamv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	conversionutil "sigs.k8s.io/cluster-api/util/conversion"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// A v1beta1 client (as Cluster API v1.9 and older, or clusterctl move of old
// objects, would be) writes through the real API server and conversion
// webhook; v1beta2 readers see the same configuration in v1beta2's shape, and
// v1beta1 readers get back what was written.
func TestV1Beta1WritesReadAsV1Beta2(t *testing.T) {
	ctx := context.Background()
	setGates(t, true, false)

	old := &upstreamv1beta1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1-written", Namespace: "default"},
		Spec: upstreamv1beta1.KubeadmConfigSpec{
			ClusterConfiguration: &upstreamv1beta1.ClusterConfiguration{
				APIServer: upstreamv1beta1.APIServer{
					TimeoutForControlPlane: &metav1.Duration{Duration: 5 * time.Minute},
					ControlPlaneComponent:  upstreamv1beta1.ControlPlaneComponent{ExtraArgs: map[string]string{"audit-log-maxage": "30"}},
				},
			},
			JoinConfiguration: &upstreamv1beta1.JoinConfiguration{
				NodeRegistration: upstreamv1beta1.NodeRegistrationOptions{Name: "node-a"},
				Discovery: upstreamv1beta1.Discovery{
					BootstrapToken: &upstreamv1beta1.BootstrapTokenDiscovery{APIServerEndpoint: "10.0.0.1:6443", UnsafeSkipCAVerification: true},
					Timeout:        &metav1.Duration{Duration: 3 * time.Minute},
				},
			},
			Files:  []upstreamv1beta1.File{{Path: "/etc/motd", Content: "hello", Append: true}},
			Format: upstreamv1beta1.Ignition,
			Ignition: &upstreamv1beta1.IgnitionSpec{ContainerLinuxConfig: &upstreamv1beta1.ContainerLinuxConfig{
				AdditionalConfig: "storage:\n  files: []\n", Strict: true,
			}},
		},
	}
	written := old.DeepCopy()
	if err := env.Client.Create(ctx, old); err != nil {
		t.Fatalf("creating through v1beta1: %v", err)
	}

	hub := &bootstrapv1.KubeadmConfig{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), hub); err != nil {
		t.Fatal(err)
	}
	s := hub.Spec
	if got := s.InitConfiguration.Timeouts.ControlPlaneComponentHealthCheckSeconds; got == nil || *got != 300 {
		t.Errorf("timeoutForControlPlane did not become initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds=300: %v", got)
	}
	if got := s.JoinConfiguration.Timeouts.TLSBootstrapSeconds; got == nil || *got != 180 {
		t.Errorf("discovery.timeout did not become joinConfiguration.timeouts.tlsBootstrapSeconds=180: %v", got)
	}
	if got := s.ClusterConfiguration.APIServer.ExtraArgs; len(got) != 1 || got[0].Name != "audit-log-maxage" || ptr.Deref(got[0].Value, "") != "30" {
		t.Errorf("extraArgs: %+v", got)
	}
	if s.Format != bootstrapv1.Ignition || !strings.Contains(s.Ignition.ContainerLinuxConfig.AdditionalConfig, "storage:") || !ptr.Deref(s.Ignition.ContainerLinuxConfig.Strict, false) {
		t.Errorf("format/ignition: %s %+v", s.Format, s.Ignition)
	}
	if !ptr.Deref(s.Files[0].Append, false) || !ptr.Deref(s.JoinConfiguration.Discovery.BootstrapToken.UnsafeSkipCAVerification, false) {
		t.Errorf("bools: files[0].append=%v unsafeSkipCAVerification=%v", s.Files[0].Append, s.JoinConfiguration.Discovery.BootstrapToken.UnsafeSkipCAVerification)
	}
	if _, ok := hub.Annotations[conversionutil.DataAnnotation]; ok {
		t.Error("the stored object keeps the conversion-data annotation")
	}

	back := &upstreamv1beta1.KubeadmConfig{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), back); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(written.Spec, back.Spec) {
		t.Errorf("v1beta1 read differs from v1beta1 write:\n%s", cmp.Diff(written.Spec, back.Spec))
	}

	// Admission judges v1beta1 writes in v1beta2 terms.
	setGates(t, false, false)
	bad := written.DeepCopy()
	bad.Name = "v1beta1-gated"
	if err := env.Client.Create(ctx, bad); !strings.Contains(strings.Join(causes(t, err), ","), "spec.format") {
		t.Errorf("a v1beta1 ignition config with the gate off: %v", err)
	}
}

// What v1beta1 cannot express (format raw, Butane) survives a v1beta1
// client's read-modify-write; the change it made lands.
func TestV1Beta1ClientKeepsWhatOnlyV1Beta2Has(t *testing.T) {
	ctx := context.Background()
	setGates(t, true, true)

	raw := config(bootstrapv1.Raw)
	butane := config(bootstrapv1.Ignition)
	butane.Spec.Ignition.Butane = bootstrapv1.ButaneConfig{AdditionalConfig: "variant: flatcar\nversion: 1.1.0\nstorage:\n  files:\n  - path: /etc/hi\n", Strict: ptr.To(true)}
	tmpl := template(butane.Spec)
	for _, o := range []client.Object{raw, butane, tmpl} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	for _, want := range []*bootstrapv1.KubeadmConfig{raw, butane} {
		t.Run(string(want.Spec.Format), func(t *testing.T) {
			old := &upstreamv1beta1.KubeadmConfig{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(want), old); err != nil {
				t.Fatal(err)
			}
			if old.Spec.Format == "raw" || old.Spec.Ignition != nil && old.Spec.Ignition.ContainerLinuxConfig != nil {
				t.Errorf("v1beta1 shows what its schema does not have: format %q ignition %+v", old.Spec.Format, old.Spec.Ignition)
			}
			old.Spec.JoinConfiguration.NodeRegistration.Name = "renamed-by-v1beta1"
			if err := env.Client.Update(ctx, old); err != nil {
				t.Fatalf("v1beta1 update: %v", err)
			}
			got := &bootstrapv1.KubeadmConfig{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.JoinConfiguration.NodeRegistration.Name != "renamed-by-v1beta1" {
				t.Error("the v1beta1 change was lost")
			}
			got.Spec.JoinConfiguration.NodeRegistration.Name = want.Spec.JoinConfiguration.NodeRegistration.Name
			if !apiequality.Semantic.DeepEqual(want.Spec, got.Spec) {
				t.Errorf("v1beta2 spec after a v1beta1 update:\n%s", cmp.Diff(want.Spec, got.Spec))
			}
		})
	}

	t.Run("template", func(t *testing.T) {
		old := &upstreamv1beta1.KubeadmConfigTemplate{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), old); err != nil {
			t.Fatal(err)
		}
		if old.Labels == nil {
			old.Labels = map[string]string{}
		}
		old.Labels["touched-by"] = "v1beta1"
		if err := env.Client.Update(ctx, old); err != nil {
			t.Fatalf("v1beta1 update: %v", err)
		}
		got := &bootstrapv1.KubeadmConfigTemplate{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), got); err != nil {
			t.Fatal(err)
		}
		if got.Labels["touched-by"] != "v1beta1" || !apiequality.Semantic.DeepEqual(tmpl.Spec, got.Spec) {
			t.Errorf("template after a v1beta1 update: labels %v\n%s", got.Labels, cmp.Diff(tmpl.Spec, got.Spec))
		}
	})

	// A v1beta1 writer that picks a format of its own wins over the stored raw.
	t.Run("v1beta1 format choice", func(t *testing.T) {
		old := &upstreamv1beta1.KubeadmConfig{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(raw), old); err != nil {
			t.Fatal(err)
		}
		old.Spec.Format = upstreamv1beta1.CloudConfig
		if err := env.Client.Update(ctx, old); err != nil {
			t.Fatal(err)
		}
		got := &bootstrapv1.KubeadmConfig{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(raw), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Format != bootstrapv1.CloudConfig {
			t.Errorf("format %q, want the v1beta1 writer's cloud-config", got.Spec.Format)
		}
	})
}
