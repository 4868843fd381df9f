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

// Package config holds the simulated provider's kustomize manifests; this
// test builds its components as a release does and checks what clusterctl,
// Cluster API and the manager binary rely on.
package config

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drone/envsubst/v2"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/components"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/manager"
)

const testImage = "example.test/simulated-controller:v0.1.0"

func buildComponents(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	out, err := components.Build("default", map[string]string{"simulated-controller": testImage})
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	return objs
}

func TestComponents(t *testing.T) {
	clusterScoped := map[string]bool{"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true}
	kinds := map[string]int{}
	for _, o := range buildComponents(t) {
		kinds[o.GetKind()]++
		if ns := o.GetNamespace(); !clusterScoped[o.GetKind()] && ns != "simulated-system" {
			t.Errorf("%s/%s is in namespace %q", o.GetKind(), o.GetName(), ns)
		}
		if o.GetLabels()["cluster.x-k8s.io/provider"] != "infrastructure-simulated" {
			t.Errorf("%s/%s lacks the provider label", o.GetKind(), o.GetName())
		}
		switch o.GetKind() {
		case "CustomResourceDefinition":
			if o.GetLabels()["cluster.x-k8s.io/v1beta2"] != "v1alpha1" {
				t.Errorf("CRD %s lacks the contract label", o.GetName())
			}
		case "Deployment":
			checkDeployment(t, o)
		case "ClusterRole":
			checkAggregation(t, o)
		}
	}
	for kind, want := range map[string]int{"CustomResourceDefinition": 6, "Deployment": 1, "ClusterRole": 2, "ClusterRoleBinding": 1, "ServiceAccount": 1, "Role": 1} {
		if kinds[kind] != want {
			t.Errorf("%d %s, want %d", kinds[kind], kind, want)
		}
	}
}

// checkDeployment: the image is the release's, and the manager's flags,
// with the cloud's URL substituted as clusterctl does, are the binary's.
func checkDeployment(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	d := &appsv1.Deployment{}
	b, _ := yaml.Marshal(o.Object)
	if err := yaml.Unmarshal(b, d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != testImage || c.ImagePullPolicy != "IfNotPresent" {
		t.Errorf("manager image %s pulled %s", c.Image, c.ImagePullPolicy)
	}
	if !strings.Contains(strings.Join(c.Args, " "), "${SIMULATED_CLOUD_URL}") {
		t.Errorf("the cloud's URL is not a clusterctl variable: %v", c.Args)
	}
	env := map[string]string{"SIMULATED_CLOUD_URL": "http://10.0.0.1:8080"}
	var args []string
	for _, a := range c.Args {
		s, err := envsubst.Eval(a, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, s)
	}
	if _, err := manager.ParseFlags(args); err != nil {
		t.Errorf("the manager rejects its Deployment's args %v: %v", args, err)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the manager's root file system is writable")
	}
}

// checkAggregation: Cluster API's core and KubeadmControlPlane managers get
// this provider's kinds through their aggregated roles.
func checkAggregation(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	labels := o.GetLabels()
	if labels["cluster.x-k8s.io/aggregate-to-manager"] == "" {
		return // the manager's own role
	}
	if labels["kubeadm.controlplane.cluster.x-k8s.io/aggregate-to-manager"] != "true" {
		t.Error("KubeadmControlPlane's manager does not get the machine templates")
	}
	r := &rbacv1.ClusterRole{}
	b, _ := yaml.Marshal(o.Object)
	if err := yaml.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if len(r.Rules) != 1 || r.Rules[0].APIGroups[0] != "infrastructure.simulated.cabpk-formats.io" {
		t.Errorf("aggregated rules %+v", r.Rules)
	}
}

func TestManagerFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error; empty: accepted
	}{
		{args: []string{"--cloud-url=http://10.0.0.1:8080"}},
		{args: nil, want: "--cloud-url is required"},
		{args: []string{"--cloud-url=10.0.0.1:8080"}, want: "--cloud-url must be an http(s) URL"},
		{args: []string{"--cloud-url=http://10.0.0.1:8080", "--concurrency=0"}, want: "--concurrency"},
	} {
		_, err := manager.ParseFlags(tc.args)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
