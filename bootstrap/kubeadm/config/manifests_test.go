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

// Package config holds the provider's kustomize manifests; this test builds
// them the way a release would and checks what clusterctl and Cluster API rely on.
package config

import (
	"os"
	"strings"
	"testing"

	"github.com/drone/envsubst/v2"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/manager"
)

func build(t *testing.T, dir string) resmap.ResMap {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return m
}

func TestDefaultManifests(t *testing.T) {
	m := build(t, "default")

	kinds := map[string]int{}
	for _, r := range m.Resources() {
		kinds[r.GetKind()]++
		clusterScoped := map[string]bool{"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
			"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true}
		if ns := r.GetNamespace(); !clusterScoped[r.GetKind()] && ns != "capi-kubeadm-bootstrap-system" {
			t.Errorf("%s/%s is in namespace %q", r.GetKind(), r.GetName(), ns)
		}
		if r.GetLabels()["cluster.x-k8s.io/provider"] != "bootstrap-kubeadm" {
			t.Errorf("%s/%s lacks the provider label", r.GetKind(), r.GetName())
		}
	}
	for kind, want := range map[string]int{"CustomResourceDefinition": 2, "Deployment": 1, "ClusterRole": 1, "Certificate": 1, "Issuer": 1, "Service": 1,
		"MutatingWebhookConfiguration": 1, "ValidatingWebhookConfiguration": 1} {
		if kinds[kind] != want {
			t.Errorf("%d %s, want %d", kinds[kind], kind, want)
		}
	}

	for _, r := range m.Resources() {
		switch r.GetKind() {
		case "CustomResourceDefinition":
			labels := r.GetLabels()
			if labels["cluster.x-k8s.io/v1beta2"] != "v1beta2" || labels["cluster.x-k8s.io/v1beta1"] != "v1beta1" {
				t.Errorf("CRD %s lacks the contract labels: %v", r.GetName(), labels)
			}
			checkConversionWebhook(t, r.GetName(), r.MustYaml())
		case "Certificate":
			names, _ := r.GetSlice("spec.dnsNames")
			if len(names) != 2 || names[0] != "capi-kubeadm-bootstrap-webhook-service.capi-kubeadm-bootstrap-system.svc" {
				t.Errorf("certificate DNS names not filled in from the Service: %v", names)
			}
		case "Deployment":
			checkManagerArgs(t, r.MustYaml())
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			if got := r.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "capi-kubeadm-bootstrap-system/capi-kubeadm-bootstrap-serving-cert" {
				t.Errorf("%s: CA injection annotation %q", r.GetKind(), got)
			}
			y := r.MustYaml()
			if !strings.Contains(y, "name: capi-kubeadm-bootstrap-webhook-service") || !strings.Contains(y, "namespace: capi-kubeadm-bootstrap-system") {
				t.Errorf("%s does not point at the webhook Service:\n%s", r.GetKind(), y)
			}
			for _, kind := range []string{"kubeadmconfigs", "kubeadmconfigtemplates"} {
				if !strings.Contains(y, "- "+kind) {
					t.Errorf("%s does not cover %s", r.GetKind(), kind)
				}
			}
		}
	}
}

// checkManagerArgs substitutes the clusterctl variables with their defaults
// (and with the gates switched on) and parses the result with the manager's
// own flag set, so a manifest can never pass a flag the binary lacks.
func checkManagerArgs(t *testing.T, deployment string) {
	t.Helper()
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string
						Args []string
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(deployment), &d); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			args = c.Args
		}
	}
	joined := strings.Join(args, " ")
	for _, v := range []string{"${EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION:=false}", "${EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW:=false}", "${EXP_MACHINE_POOL:=true}", "${KUBEADM_BOOTSTRAP_TOKEN_TTL:=15m}", "${EXP_PRIORITY_QUEUE:=true}", "${EXP_RECONCILER_RATE_LIMITING:=true}"} {
		if !strings.Contains(joined, v) {
			t.Errorf("manager args lack %s: %v", v, args)
		}
	}
	for name, env := range map[string]map[string]string{
		"defaults": {},
		"gates on": {"EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION": "true", "EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW": "true", "EXP_MACHINE_POOL": "false", "KUBEADM_BOOTSTRAP_TOKEN_TTL": "30m"},
	} {
		var substituted []string
		for _, a := range args {
			s, err := envsubst.Eval(a, func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			substituted = append(substituted, s)
		}
		if _, err := manager.ParseFlags(substituted); err != nil {
			t.Errorf("%s: manager rejects its manifest's args %v: %v", name, substituted, err)
		}
		if name == "gates on" && !strings.Contains(strings.Join(substituted, " "), "KubeadmBootstrapFormatRaw=true") {
			t.Errorf("EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW does not reach the gate: %v", substituted)
		}
	}
}

func TestMetadataYAML(t *testing.T) {
	data, err := os.ReadFile("../../../metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		APIVersion    string `json:"apiVersion"`
		Kind          string `json:"kind"`
		ReleaseSeries []struct {
			Major, Minor int
			Contract     string
		} `json:"releaseSeries"`
	}
	if err := yaml.UnmarshalStrict(data, &md); err != nil {
		t.Fatal(err)
	}
	if md.Kind != "Metadata" || md.APIVersion != "clusterctl.cluster.x-k8s.io/v1alpha3" || len(md.ReleaseSeries) == 0 {
		t.Fatalf("not a clusterctl metadata file: %+v", md)
	}
	for _, s := range md.ReleaseSeries {
		if s.Contract != "v1beta2" {
			t.Errorf("release %d.%d declares contract %s, want v1beta2", s.Major, s.Minor, s.Contract)
		}
	}
}

// checkConversionWebhook: the CRD sends conversions to the manager's /convert
// through the prefixed webhook Service, with cert-manager's CA injected.
func checkConversionWebhook(t *testing.T, name, crdYAML string) {
	t.Helper()
	var crd struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Conversion struct {
				Strategy string `json:"strategy"`
				Webhook  struct {
					ConversionReviewVersions []string `json:"conversionReviewVersions"`
					ClientConfig             struct {
						Service struct{ Namespace, Name, Path string } `json:"service"`
					} `json:"clientConfig"`
				} `json:"webhook"`
			} `json:"conversion"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(crdYAML), &crd); err != nil {
		t.Fatal(err)
	}
	conv := crd.Spec.Conversion
	svc := conv.Webhook.ClientConfig.Service
	if conv.Strategy != "Webhook" || svc.Name != "capi-kubeadm-bootstrap-webhook-service" || svc.Namespace != "capi-kubeadm-bootstrap-system" || svc.Path != "/convert" ||
		len(conv.Webhook.ConversionReviewVersions) == 0 {
		t.Errorf("CRD %s conversion: %+v", name, conv)
	}
	if got := crd.Metadata.Annotations["cert-manager.io/inject-ca-from"]; got != "capi-kubeadm-bootstrap-system/capi-kubeadm-bootstrap-serving-cert" {
		t.Errorf("CRD %s: CA injection annotation %q", name, got)
	}
}
