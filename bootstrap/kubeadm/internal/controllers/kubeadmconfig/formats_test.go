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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

func initSpec(format bootstrapv1.Format) bootstrapv1.KubeadmConfigSpec {
	s := bootstrapv1.KubeadmConfigSpec{Format: format}
	s.InitConfiguration.NodeRegistration.Name = "cp-0"
	return s
}

func joinSpec(format bootstrapv1.Format, controlPlane bool) bootstrapv1.KubeadmConfigSpec {
	s := bootstrapv1.KubeadmConfigSpec{Format: format}
	s.JoinConfiguration.NodeRegistration.Name = "node"
	if controlPlane {
		s.JoinConfiguration.ControlPlane = &upstreambootstrapv1.JoinControlPlane{}
	}
	return s
}

// checkDataSecret checks the Cluster API contract of a data secret and runs
// the format's real consumers' validators over it.
func checkDataSecret(t *testing.T, cfg *bootstrapv1.KubeadmConfig, cluster string, sec *corev1.Secret, format bootstrapv1.Format) {
	t.Helper()
	if sec.Name != cfg.Name && !revisionOf(cfg.Name).MatchString(sec.Name) || sec.Type != clusterv1.ClusterSecretType || sec.Labels[clusterv1.ClusterNameLabel] != cluster {
		t.Errorf("%s: data secret name/type/label: %s %s %v", cfg.Name, sec.Name, sec.Type, sec.Labels)
	}
	if c := metav1.GetControllerOf(sec); c == nil || c.UID != cfg.UID || c.Kind != "KubeadmConfig" {
		t.Errorf("%s: data secret is not controlled by its KubeadmConfig: %v", cfg.Name, sec.OwnerReferences)
	}
	if string(sec.Data["format"]) != string(format) || len(sec.Data["value"]) == 0 {
		t.Errorf("%s: format %q, %d bytes of value", cfg.Name, sec.Data["format"], len(sec.Data["value"]))
	}
	if err := consumers.BootstrapData(string(format), sec.Data["value"]); err != nil {
		t.Errorf("%s: %v", cfg.Name, err)
	}
	if !ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) || cfg.Status.DataSecretName != sec.Name || cfg.Status.ObservedGeneration != cfg.Generation {
		t.Errorf("%s: status %+v", cfg.Name, cfg.Status)
	}
	for _, want := range []string{"Ready", "DataSecretAvailable", "CertificatesAvailable"} {
		if c := findCondition(cfg.Status.Conditions, want); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s: condition %s is %+v", cfg.Name, want, c)
		}
	}
	if c := findCondition(cfg.Status.Conditions, "Paused"); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("%s: Paused condition %+v", cfg.Name, c)
	}
	if cfg.Status.Deprecated == nil || cfg.Status.Deprecated.V1Beta1 == nil || len(cfg.Status.Deprecated.V1Beta1.Conditions) == 0 {
		t.Errorf("%s: no v1beta1 conditions: %+v", cfg.Name, cfg.Status.Deprecated)
	}
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// TestEveryFormatAndAction brings one cluster per format from nothing to an
// initialized control plane with a joining control-plane machine and a
// worker, as Cluster API's controllers would, and checks every data secret.
func TestEveryFormatAndAction(t *testing.T) {
	startManager(t)
	for _, format := range bootstrapv1.Formats {
		t.Run(string(format), func(t *testing.T) {
			f := newFixture(t)
			_, cp0 := f.machine("cp-0", true, initSpec(format))
			f.waitForReason(cp0, "DataSecretAvailable", bootstrapv1.KubeadmConfigWaitingForClusterInfrastructureReason)

			f.setClusterStatus(true, false)
			sec := f.waitForData(cp0)
			checkDataSecret(t, cp0, f.cluster.Name, sec, format)
			if format == bootstrapv1.Raw && len(sec.Data["files"]) == 0 {
				t.Error("a raw control-plane init must carry its PKI in the files key")
			}
			if sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation] != "" || len(tokensOf(t, cp0)) != 0 {
				t.Error("kubeadm init makes its own token; no bootstrap token is created for it")
			}
			// The first control plane of a cluster without a control-plane
			// provider generates the cluster certificates, owned by its config.
			ca := &corev1.Secret{}
			if err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: secret.Name(f.cluster.Name, secret.ClusterCA)}, ca); err != nil {
				t.Fatalf("cluster CA: %v", err)
			}
			if c := metav1.GetControllerOf(ca); c == nil || c.UID != cp0.UID {
				t.Errorf("cluster CA owner: %v", ca.OwnerReferences)
			}

			_, worker := f.machine("worker-0", false, joinSpec(format, false))
			f.waitForReason(worker, "DataSecretAvailable", bootstrapv1.KubeadmConfigWaitingForControlPlaneInitReason)

			f.setClusterStatus(true, true)
			_, cp1 := f.machine("cp-1", true, joinSpec(format, true))
			for _, cfg := range []*bootstrapv1.KubeadmConfig{worker, cp1} {
				sec := f.waitForData(cfg)
				checkDataSecret(t, cfg, f.cluster.Name, sec, format)
				tokens := tokensOf(t, cfg)
				if len(tokens) != 1 {
					t.Fatalf("%s: %d bootstrap tokens in the workload cluster, want 1", cfg.Name, len(tokens))
				}
				id := string(tokens[0].Data["token-id"])
				token := id + "." + string(tokens[0].Data["token-secret"])
				if sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation] != id {
					t.Errorf("%s: data secret names token %q, the workload cluster has %q", cfg.Name, sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation], id)
				}
				_, kubeadmConfig, err := consumers.KubeadmConfigIn(string(format), sec.Data["value"])
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(kubeadmConfig), "token: "+token) || !strings.Contains(string(kubeadmConfig), "sha256:") ||
					!strings.Contains(string(kubeadmConfig), "apiServerEndpoint: 10.0.0.1:6443") {
					t.Errorf("%s: join discovery lacks the token, the CA pin or the endpoint:\n%s", cfg.Name, kubeadmConfig)
				}
			}
			if format == bootstrapv1.Raw {
				if sec := f.waitForData(cp1); len(sec.Data["files"]) == 0 {
					t.Error("a raw control-plane join must carry the control-plane certificates in the files key")
				}
			}
		})
	}
}

// TestFormatAnnotationChoosesWhatRenders: a KubeadmConfig as
// KubeadmControlPlane writes it (spec.format cloud-config) with the format
// annotation KCP copies from its machine template renders raw, and its spec
// stays as written.
func TestFormatAnnotationChoosesWhatRenders(t *testing.T) {
	startManager(t)
	f := newFixture(t)
	_, cp0 := f.machine("cp-0", true, initSpec(bootstrapv1.CloudConfig))
	f.waitForReason(cp0, "DataSecretAvailable", bootstrapv1.KubeadmConfigWaitingForClusterInfrastructureReason)
	patch := client.MergeFrom(cp0.DeepCopy())
	cp0.Annotations = map[string]string{bootstrapv1.FormatAnnotation: string(bootstrapv1.Raw)}
	if err := mgmt.Client.Patch(f.ctx, cp0, patch); err != nil {
		t.Fatal(err)
	}
	f.setClusterStatus(true, false)
	sec := f.waitForData(cp0)
	checkDataSecret(t, cp0, f.cluster.Name, sec, bootstrapv1.Raw)
	if err := mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(cp0), cp0); err != nil {
		t.Fatal(err)
	}
	if cp0.Spec.Format != bootstrapv1.CloudConfig {
		t.Errorf("spec.format became %q: the spec KubeadmControlPlane compares must stay as written", cp0.Spec.Format)
	}
}
