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

package management

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/framework"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// initBudget is how long clusterctl init may take, warm, until every
// provider is Available (issue #33).
const initBudget = 5 * time.Minute

// TestClusterctlInit makes a management cluster as users have one: a
// kubeadm cluster whose node boots from the management machine image (every
// provider's image in its store, no registry), initialised by clusterctl
// from the repository with cert-manager, Cluster API, KubeadmControlPlane,
// this provider and the simulated provider, each running as its Deployment
// says. This provider's webhooks then answer through their Service with
// cert-manager's certificate.
func TestClusterctlInit(t *testing.T) {
	w := managementCluster(t, "clusterctl-init")
	kubeconfig := w.KubeconfigFile()
	start := time.Now()
	clusterctl(t, "init", "--kubeconfig", kubeconfig, "--config", clusterctlConfig(t),
		"--core", "cluster-api:"+testbin.Versions["CLUSTER_API_VERSION"],
		"--bootstrap", "kubeadm:"+releases.OurVersion,
		"--control-plane", "kubeadm:"+testbin.Versions["CLUSTER_API_VERSION"],
		"--infrastructure", "simulated:"+releases.SimulatedVersion,
		"--wait-providers", "--wait-provider-timeout", "600")
	took := time.Since(start)
	t.Logf("clusterctl init: every provider Available after %s", took.Round(time.Second))
	if took > initBudget {
		t.Errorf("clusterctl init took %s, over the %s budget", took.Round(time.Second), initBudget)
	}
	c := managementClient(t, w)
	expectProviderImages(t, c)
	expectWebhookRefusal(t, c)
}

// managementCluster boots a one-node kubeadm cluster from the management
// machine image. Its control-plane node keeps no taint, as a kind cluster's
// does in Cluster API's quick start, so cert-manager's Pods run there too.
func managementCluster(t *testing.T, name string) *framework.WorkloadCluster {
	t.Helper()
	w := framework.NewCluster(t, framework.ClusterInput{Stack: st, Name: name})
	objects := w.ControlPlaneMachine(name+"-cp-0", bootstrapv1.CloudConfig, func(s *bootstrapv1.KubeadmConfigSpec) {
		s.InitConfiguration.NodeRegistration.Taints = ptr.To([]corev1.Taint{})
	})
	for _, o := range objects {
		if sm, ok := o.(*infrav1.SimulatedMachine); ok {
			sm.Spec.Image = releases.MachineImage
		}
	}
	w.Create(objects...)
	w.ExpectNodes(w.WaitForMachines(1, 5*time.Minute))
	store := w.OnHost(name+"-cp-0", "ctr", "--namespace", "k8s.io", "images", "list", "--quiet")
	for _, i := range rel.Images {
		if !strings.Contains(store, i.Ref) {
			t.Fatalf("the node's image store lacks %s", i.Ref)
		}
	}
	return w
}

// clusterctlConfig writes the clusterctl configuration of the repository,
// with the simulated cloud's URL and this provider's format gates on.
func clusterctlConfig(t *testing.T) string {
	t.Helper()
	b, err := rel.Config(map[string]string{
		"SIMULATED_CLOUD_URL":                   st.Cloud.URL,
		"EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION": "true",
		"EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW":      "true",
		"CLUSTER_TOPOLOGY":                      "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "clusterctl.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterctl runs Cluster API's clusterctl with a configuration directory of
// its own and no version check (nothing outside the lab is reachable).
func clusterctl(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(testbin.MustPath(t, testbin.Clusterctl), args...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
	t.Logf("clusterctl %s", strings.Join(args, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("clusterctl %s: %v\n%s", args[0], err, out)
	}
	return string(out)
}

func managementClient(t *testing.T, w *framework.WorkloadCluster) client.Client {
	t.Helper()
	c, err := client.New(w.RestConfig(), client.Options{Scheme: st.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// expectProviderImages: the Deployments of the providers built from this
// tree run the images the repository names, from the node's store.
func expectProviderImages(t *testing.T, c client.Client) {
	t.Helper()
	want := map[string]string{
		"capi-kubeadm-bootstrap-system/capi-kubeadm-bootstrap-controller-manager": releases.OurImage,
		"simulated-system/capsim-controller-manager":                              releases.SimulatedImage,
	}
	for key, image := range want {
		ns, name, _ := strings.Cut(key, "/")
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			t.Errorf("%s runs %s, want %s", key, got, image)
		}
	}
}

// expectWebhookRefusal: a KubeadmConfig with a field its format does not
// honour is refused by this provider's webhook, reached through its Service
// with cert-manager's certificate, naming the field.
func expectWebhookRefusal(t *testing.T, c client.Client) {
	t.Helper()
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "refused"},
		Spec: bootstrapv1.KubeadmConfigSpec{
			Format:   bootstrapv1.CloudConfig,
			Ignition: bootstrapv1.IgnitionSpec{Butane: bootstrapv1.ButaneConfig{AdditionalConfig: "variant: flatcar\nversion: 1.1.0"}},
		},
	}
	err := c.Create(context.Background(), cfg, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "spec.ignition") || !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("a cloud-config KubeadmConfig with spec.ignition: got %v, want a refusal naming the field", err)
	}
}
