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

package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/runtimehook"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// updateMachineHandler is the name this provider serves UpdateMachine under.
const updateMachineHandler = "update-machine"

// UpdateInPlace changes machine to desired through this provider's
// UpdateMachine hook, called as Cluster API's Machine controller calls it
// (again after each retryAfterSeconds, until done), and returns the
// messages it answered. A Failure fails the test. started, when given,
// runs after the first call: the update's Pod and Secret exist.
func (w *Cluster) UpdateInPlace(machine clusterv1.Machine, desired *bootstrapv1.KubeadmConfig, timeout time.Duration, started ...func()) []string {
	w.t.Helper()
	desired = desired.DeepCopy()
	desired.TypeMeta = metav1.TypeMeta{APIVersion: bootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig"}
	cfg, err := json.Marshal(desired)
	if err != nil {
		w.t.Fatal(err)
	}
	req := &runtimehooksv1.UpdateMachineRequest{Desired: runtimehooksv1.UpdateMachineRequestObjects{
		Machine: machine, BootstrapConfig: runtime.RawExtension{Raw: cfg},
	}}
	address, ca := w.mgmt.WebhookEndpoint()
	var messages []string
	for deadline := time.Now().Add(timeout); ; {
		var resp runtimehooksv1.UpdateMachineResponse
		if err := runtimehook.Call(address, ca, runtimehooksv1.UpdateMachine, updateMachineHandler, req, &resp); err != nil {
			w.t.Fatal(err)
		}
		if len(messages) == 0 || messages[len(messages)-1] != resp.Message {
			messages = append(messages, resp.Message)
			w.t.Logf("UpdateMachine %s: %s %q (retry after %ds)", machine.Name, resp.Status, resp.Message, resp.RetryAfterSeconds)
		}
		if len(messages) == 1 && len(started) > 0 && resp.RetryAfterSeconds > 0 {
			for _, f := range started {
				f()
			}
			started = nil
		}
		switch {
		case resp.Status == runtimehooksv1.ResponseStatusFailure:
			w.DumpLogs()
			w.t.Fatalf("UpdateMachine %s failed: %s", machine.Name, resp.Message)
		case resp.RetryAfterSeconds == 0:
			return messages
		case time.Now().After(deadline):
			w.DumpLogs()
			w.t.Fatalf("UpdateMachine %s still in progress after %s: %s", machine.Name, timeout, resp.Message)
		}
		time.Sleep(time.Duration(resp.RetryAfterSeconds) * time.Second)
	}
}

// ImportImage loads an image into the containerd of machine's host (the
// SimulatedMachine of that name), as a site preloads images.
func (w *Cluster) ImportImage(machine string, a host.ImageArchive) {
	w.t.Helper()
	h := w.stack.Lab.Host(w.Namespace + "/" + machine)
	if h == nil {
		w.t.Fatalf("no host for machine %s", machine)
	}
	if err := h.ImportImage(a); err != nil {
		w.t.Fatal(err)
	}
}

// HostFile is a file as the scenarios compare it between hosts: its mode,
// owner and content.
type HostFile struct {
	Mode, Owner, Content string
}

// FileOnHost reads a file on machine's host.
func (w *Cluster) FileOnHost(machine, path string) HostFile {
	w.t.Helper()
	f, err := ReadHostFile(func(args ...string) ([]byte, error) {
		out, err := w.TryOnHost(machine, args...)
		return []byte(out), err
	}, path)
	if err != nil {
		w.t.Fatalf("on %s: %v", machine, err)
	}
	return f
}

// ReadHostFile reads a file on a host through exec, which runs a command
// there (Host.Exec, or host.ExecIn from a process without the Lab).
func ReadHostFile(exec func(args ...string) ([]byte, error), path string) (HostFile, error) {
	out, err := exec("stat", "-c", "%a %U:%G", path)
	stat := strings.Fields(string(out))
	if err != nil || len(stat) != 2 {
		return HostFile{}, fmt.Errorf("stat %s: %v: %s", path, err, out)
	}
	content, err := exec("cat", path)
	if err != nil {
		return HostFile{}, fmt.Errorf("cat %s: %w: %s", path, err, content)
	}
	return HostFile{Mode: stat[0], Owner: stat[1], Content: string(content)}, nil
}

// providerIDFlag is the one kubelet flag two machines of one spec differ
// in: each has its own provider ID.
var providerIDFlag = regexp.MustCompile(`--provider-id=[^ "]+`)

// WithoutProviderID replaces a machine's own provider ID in a kubeadm flags
// file's content, so that two machines' files compare; ok is false when the
// file names another provider ID.
func WithoutProviderID(content, providerID string) (out string, ok bool) {
	if strings.Contains(content, "--provider-id=") && !strings.Contains(content, "--provider-id="+providerID) {
		return content, false
	}
	return providerIDFlag.ReplaceAllString(content, "--provider-id=<this machine's>"), true
}

// ExpectNoUpdateLeft checks that no in-place update's Pod or Secret is left
// in the workload cluster.
func (w *Cluster) ExpectNoUpdateLeft() {
	w.t.Helper()
	cs := w.WorkloadClient()
	sel := metav1.ListOptions{LabelSelector: rawv1.NodeUpdateNodeLabel}
	pods, err := cs.CoreV1().Pods(rawv1.NodeUpdateNamespace).List(context.Background(), sel)
	if err != nil {
		w.t.Fatal(err)
	}
	secrets, err := cs.CoreV1().Secrets(rawv1.NodeUpdateNamespace).List(context.Background(), sel)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, p := range pods.Items {
		w.t.Errorf("update Pod %s left on Node %s (%s)", p.Name, p.Spec.NodeName, p.Status.Phase)
	}
	for _, s := range secrets.Items {
		w.t.Errorf("update Secret %s left", s.Name)
	}
}

// WaitForRunningKubelet waits until machine's Node is Ready and its running
// kubelet has maxPods (a flag) and containerLogMaxSize (its configuration
// file) as given.
func (w *Cluster) WaitForRunningKubelet(m clusterv1.Machine, maxPods int32, containerLogMaxSize string, timeout time.Duration) {
	w.t.Helper()
	cs := w.WorkloadClient()
	node := m.Status.NodeRef.Name
	var last kubeletConfig
	w.WaitFor(timeout, "the kubelet of "+node+" running with the update", func() bool {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil || !nodeReady(n) {
			return false
		}
		if last, err = runningKubeletConfig(cs, node); err != nil {
			return false
		}
		return last.MaxPods == maxPods && last.ContainerLogMaxSize == containerLogMaxSize
	}, func() string { return fmt.Sprintf("last /configz: %+v", last) })
}

// ExpectUpdateReadableOnlyByItsNode checks, while an update of machine's
// Node is under way, that the kubelet of another machine (other) cannot
// read the update's Secret with its own credentials, and that the
// kubelet of machine's Node can: the Node authorizer gives a kubelet the
// Secrets of the Pods bound to its node, and nothing else.
func (w *Cluster) ExpectUpdateReadableOnlyByItsNode(machine, other clusterv1.Machine) {
	w.t.Helper()
	cs := w.WorkloadClient()
	secrets, err := cs.CoreV1().Secrets(rawv1.NodeUpdateNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: rawv1.NodeUpdateNodeLabel})
	if err != nil {
		w.t.Fatal(err)
	}
	if len(secrets.Items) != 1 {
		w.t.Fatalf("%d update Secrets during the update of %s, want 1", len(secrets.Items), machine.Name)
	}
	name := secrets.Items[0].Name
	asKubelet := func(m clusterv1.Machine) (string, error) {
		return w.TryOnHost(m.Spec.InfrastructureRef.Name, w.KubectlPath(), "--kubeconfig", "/etc/kubernetes/kubelet.conf",
			"--namespace", rawv1.NodeUpdateNamespace, "get", "secret", name, "--output", "name")
	}
	if out, err := asKubelet(other); err == nil || !strings.Contains(out, "Forbidden") {
		w.t.Errorf("the kubelet of %s read the update Secret of %s: %v\n%s", other.Name, machine.Name, err, out)
	}
	var out string
	w.WaitFor(30*time.Second, "the kubelet of "+machine.Name+" reading its update Secret", func() bool {
		out, err = asKubelet(machine)
		return err == nil
	}, func() string { return out })
}

// ChangeClusterConfiguration changes the ClusterConfiguration in the
// workload cluster's kubeadm-config ConfigMap, as KubeadmControlPlane does
// before it updates its machines in place.
func (w *Cluster) ChangeClusterConfiguration(change func(cc map[string]any)) {
	w.t.Helper()
	ctx := context.Background()
	cms := w.WorkloadClient().CoreV1().ConfigMaps(metav1.NamespaceSystem)
	cm, err := cms.Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	cc := map[string]any{}
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cc); err != nil {
		w.t.Fatal(err)
	}
	change(cc)
	b, err := yaml.Marshal(cc)
	if err != nil {
		w.t.Fatal(err)
	}
	cm.Data["ClusterConfiguration"] = string(b)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// nodeReady reports whether a Node is Ready.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
