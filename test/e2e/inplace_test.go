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

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/workload"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// What the in-place change gives a worker: a kubeadm patch of the kubelet's
// configuration (a file, which every format carries) and a kubelet flag.
const (
	inPlacePatch      = objects.KubeadmPatchesDir + "/kubeletconfiguration1+merge.yaml"
	inPlaceLogMaxSize = "7Mi"
	inPlaceMaxPods    = 99
)

func inPlaceChange(s *bootstrapv1.KubeadmConfigSpec) {
	s.Files = append(s.Files, upstreambootstrapv1.File{Path: inPlacePatch, Permissions: "0600", Content: "containerLogMaxSize: " + inPlaceLogMaxSize + "\n"})
	s.JoinConfiguration.NodeRegistration.KubeletExtraArgs = append(s.JoinConfiguration.NodeRegistration.KubeletExtraArgs,
		upstreambootstrapv1.Arg{Name: "max-pods", Value: ptr.To("99")})
}

// The files a fresh machine and a machine updated in place must hold alike.
var inPlaceFiles = []string{inPlacePatch, "/var/lib/kubelet/config.yaml", "/var/lib/kubelet/kubeadm-flags.env"}

// TestInPlaceUpdateOnTheNode: a worker of each format gets a new kubeadm
// patch file and a kubelet flag in place, through UpdateMachine called as
// Cluster API's Machine controller calls it: the manager runs the update
// with a Pod from the release's image on the node, which writes the file,
// the kubelet's configuration and flags with kubeadm, and restarts the
// kubelet; meanwhile another machine's kubelet cannot read the update's
// Secret, its own can. The Machine and its host stay; the running kubelet has the new
// configuration and flag; the files equal those of a machine bootstrapped
// fresh from the same spec, byte for byte, mode and owner; nothing is left
// in the workload cluster. Then the control plane's API server gets a flag
// in place (expectControlPlaneInPlace).
func TestInPlaceUpdateOnTheNode(t *testing.T) {
	t.Parallel() // its own cluster; the tests that restart the manager run first, alone
	// The release's image, built while the machines boot.
	built := make(chan error, 1)
	var image host.ImageArchive
	out := t.TempDir()
	go func() {
		var err error
		image, err = releases.BuildOurImage(out)
		built <- err
	}()

	w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Name: "in-place"})
	w.AddControlPlaneMachine("in-place-cp-0", bootstrapv1.CloudConfig)
	for _, f := range bootstrapv1.Formats {
		w.AddMachineDeployment("ip-"+string(f), f, 1, 0)
		fresh := w.Objects.KubeadmConfigTemplate("fresh-"+string(f), f)
		inPlaceChange(&fresh.Spec.Template.Spec)
		w.Create(fresh, w.Objects.SimulatedMachineTemplate(fresh.Name, 0), w.Objects.MachineDeployment(fresh.Name, fresh.Name, fresh.Name, 1))
	}
	w.ExpectNodes(w.WaitForMachines(1+2*len(bootstrapv1.Formats), 8*time.Minute))
	if err := <-built; err != nil {
		t.Fatal(err)
	}

	for _, f := range bootstrapv1.Formats {
		m := w.WorkerMachine("ip-" + string(f))
		fresh := w.WorkerMachine("fresh-" + string(f))
		w.ImportImage(m.Spec.InfrastructureRef.Name, image)

		desired := configOf(t, w, m)
		inPlaceChange(&desired.Spec)
		start := time.Now()
		w.UpdateInPlace(m, desired, 4*time.Minute, func() { w.ExpectUpdateReadableOnlyByItsNode(m, fresh) })
		t.Logf("%s: %s updated in place in %s", f, m.Name, time.Since(start).Round(time.Second))

		w.WaitForRunningKubelet(m, inPlaceMaxPods, inPlaceLogMaxSize, 2*time.Minute)
		w.WaitForRunningKubelet(fresh, inPlaceMaxPods, inPlaceLogMaxSize, time.Minute)
		if again := w.WorkerMachine("ip-" + string(f)); again.UID != m.UID {
			t.Errorf("%s: Machine %s was replaced by %s", f, m.Name, again.Name)
		}
		for _, p := range inPlaceFiles {
			got := w.FileOnHost(m.Spec.InfrastructureRef.Name, p)
			want := w.FileOnHost(fresh.Spec.InfrastructureRef.Name, p)
			var gotOwn, wantOwn bool
			got.Content, gotOwn = workload.WithoutProviderID(got.Content, m.Spec.ProviderID)
			want.Content, wantOwn = workload.WithoutProviderID(want.Content, fresh.Spec.ProviderID)
			if !gotOwn || !wantOwn {
				t.Errorf("%s: %s names another machine's provider ID (updated %t, fresh %t)", f, p, gotOwn, wantOwn)
			}
			if got != want {
				t.Errorf("%s: %s updated in place differs from a fresh machine's:\n%+v\nfresh:\n%+v", f, p, got, want)
			}
		}
	}
	expectControlPlaneInPlace(t, w, image)
	w.ExpectNoUpdateLeft()
}

// The control plane's manifests, which kubeadm writes from the cluster's
// ClusterConfiguration.
var manifests = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// expectControlPlaneInPlace gives the API server a flag in place, as
// KubeadmControlPlane asks: the cluster's kubeadm-config and the machine's
// spec change, the former kubeadm init machine's spec becomes a join.
// kubeadm writes the API server's manifest again with the flag and no
// other change, leaves the other manifests as they were, and the API
// server serves with it.
func expectControlPlaneInPlace(t *testing.T, w *workload.Cluster, image host.ImageArchive) {
	t.Helper()
	const flag = "- --audit-log-maxage=7"
	cp := machineNamed(t, w, "in-place-cp-0")
	w.ImportImage(cp.Spec.InfrastructureRef.Name, image)
	before := map[string]string{}
	for _, m := range manifests {
		before[m] = w.OnHost(cp.Spec.InfrastructureRef.Name, "cat", "/etc/kubernetes/manifests/"+m+".yaml")
	}
	w.ChangeClusterConfiguration(func(cc map[string]any) {
		api, _ := cc["apiServer"].(map[string]any)
		if api == nil {
			api = map[string]any{}
		}
		args, _ := api["extraArgs"].([]any)
		api["extraArgs"] = append(args, map[string]any{"name": "audit-log-maxage", "value": "7"})
		cc["apiServer"] = api
	})
	desired := configOf(t, w, cp)
	desired.Spec.InitConfiguration = upstreambootstrapv1.InitConfiguration{}
	desired.Spec.ClusterConfiguration.APIServer.ExtraArgs = append(desired.Spec.ClusterConfiguration.APIServer.ExtraArgs,
		upstreambootstrapv1.Arg{Name: "audit-log-maxage", Value: ptr.To("7")})
	start := time.Now()
	w.UpdateInPlace(cp, desired, 5*time.Minute)
	t.Logf("control plane %s updated in place in %s", cp.Name, time.Since(start).Round(time.Second))

	for _, m := range manifests {
		after := w.OnHost(cp.Spec.InfrastructureRef.Name, "cat", "/etc/kubernetes/manifests/"+m+".yaml")
		want := before[m]
		if m == "kube-apiserver" {
			if !strings.Contains(after, flag) {
				t.Errorf("the API server's manifest lacks %q:\n%s", flag, after)
			}
			after = strings.Replace(after, "    "+flag+"\n", "", 1)
		}
		if after != want {
			t.Errorf("%s's manifest changed beyond the update:\n%s\nbefore:\n%s", m, after, want)
		}
	}
	w.WaitFor(3*time.Minute, "the API server running with the flag", func() bool {
		out, err := w.TryOnHost(cp.Spec.InfrastructureRef.Name, "sh", "-c", "cat /proc/$(pgrep -x kube-apiserver)/cmdline | tr '\\0' ' '")
		return err == nil && strings.Contains(out, "--audit-log-maxage=7")
	})
	w.ExpectNodes(w.WaitForMachines(1+2*len(bootstrapv1.Formats), 3*time.Minute))
}

// configOf reads a Machine's KubeadmConfig.
func configOf(t *testing.T, w *workload.Cluster, m clusterv1.Machine) *bootstrapv1.KubeadmConfig {
	t.Helper()
	cfg := &bootstrapv1.KubeadmConfig{}
	if err := w.Client().Get(context.Background(), client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// machineNamed reads a Machine of the cluster.
func machineNamed(t *testing.T, w *workload.Cluster, name string) clusterv1.Machine {
	t.Helper()
	m := clusterv1.Machine{}
	if err := w.Client().Get(context.Background(), client.ObjectKey{Namespace: w.Namespace, Name: name}, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
