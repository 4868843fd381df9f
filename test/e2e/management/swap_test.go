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
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/workload"
)

// TestSwapByClusterctl swaps a management cluster's kubeadm bootstrap
// provider with clusterctl both ways, as docs/operator/swap-from-upstream.md
// tells users, while the management cluster runs a workload cluster: it
// starts with upstream's provider v1.14.2, makes a quick-start cluster with
// clusterctl generate cluster and kubectl apply, swaps to this provider
// (clusterctl delete, then init) and adds a worker, swaps back and adds
// another. Each new worker gets its data from the provider then installed
// and joins; the first ones keep running.
func TestSwapByClusterctl(t *testing.T) {
	w := managementCluster(t, "swap")
	kubeconfig, config := w.KubeconfigFile(), clusterctlConfig(t)
	upstream := testbin.Versions["CLUSTER_API_VERSION"]
	initProviders(t, w, kubeconfig, config, upstream)
	c := managementClient(t, w)

	workload := mustClusterctl(t, w, "generate", "cluster", "swap-workload", "--kubeconfig", kubeconfig, "--config", config,
		"--infrastructure", "simulated:"+releases.SimulatedVersion, "--kubernetes-version", objects.KubernetesVersion,
		"--control-plane-machine-count", "1", "--worker-machine-count", "1", "--target-namespace", "default")
	manifest := filepath.Join(t.TempDir(), "swap-workload.yaml")
	if err := os.WriteFile(manifest, []byte(workload), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(testbin.MustPath(t, testbin.Kubectl), "--kubeconfig", kubeconfig, "apply", "-f", manifest).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	w.WaitForMachinesIn(c, "default", 2, 10*time.Minute)

	upstreamImage := releases.UpstreamBootstrapImage()
	expectBootstrapImage(t, c, upstreamImage)
	for i, swap := range []struct{ version, image string }{{releases.OurVersion, releases.OurImage}, {upstream, upstreamImage}} {
		swapBootstrapProvider(t, w, kubeconfig, config, swap.version)
		expectBootstrapImage(t, c, swap.image)
		scaleWorkers(t, c, "swap-workload-md-0", int32(i+2))
		w.WaitForMachinesIn(c, "default", i+3, 10*time.Minute)
	}
}

// expectBootstrapImage: the kubeadm bootstrap provider's Deployment, the
// only one, runs image.
func expectBootstrapImage(t *testing.T, c client.Client, image string) {
	t.Helper()
	var deployments appsv1.DeploymentList
	if err := c.List(context.Background(), &deployments, client.InNamespace(ourNamespace)); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 || deployments.Items[0].Spec.Template.Spec.Containers[0].Image != image {
		var got []string
		for _, d := range deployments.Items {
			got = append(got, d.Name+": "+d.Spec.Template.Spec.Containers[0].Image)
		}
		t.Fatalf("the bootstrap provider's Deployments run %v, want one running %s", got, image)
	}
}

// swapBootstrapProvider removes the kubeadm bootstrap provider, keeping its
// CRDs and objects, and installs version in its place, as the swap guide
// says.
func swapBootstrapProvider(t *testing.T, w *workload.Cluster, kubeconfig, config, version string) {
	t.Helper()
	start := time.Now()
	mustClusterctl(t, w, "delete", "--kubeconfig", kubeconfig, "--config", config, "--bootstrap", "kubeadm")
	mustClusterctl(t, w, "init", "--kubeconfig", kubeconfig, "--config", config, "--bootstrap", "kubeadm:"+version,
		"--wait-providers", "--wait-provider-timeout", "600")
	t.Logf("swapped to the kubeadm bootstrap provider %s in %s", version, time.Since(start).Round(time.Second))
}

func scaleWorkers(t *testing.T, c client.Client, md string, replicas int32) {
	t.Helper()
	d := &clusterv1.MachineDeployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: md}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &replicas
	if err := c.Patch(context.Background(), d, patch); err != nil {
		t.Fatal(err)
	}
}
