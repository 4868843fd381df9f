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
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/updateextension"
)

const nodeUpdateImage = "registry.example/node-update:test"

// TestUpdateMachineRunsTheUpdateOnItsNode: UpdateMachine, called as the
// Machine controller calls it, starts one Pod pinned to the machine's Node
// in the workload cluster, with the NodeUpdate of the desired spec (files
// resolved from their Secret, kubelet flags; no token, discovery or key)
// and no API credentials. It answers in progress while the Pod runs, also
// from a restarted manager, which finds the same Pod; a failed Pod gives a
// Failure naming the step, and the next call runs the update again; a
// succeeded Pod gives done, and nothing is left behind. A changed spec
// replaces an update in progress.
func TestUpdateMachineRunsTheUpdateOnItsNode(t *testing.T) {
	stop := startManager(t, inPlaceFlags...)
	f := newRunningCluster(t)
	node := "node-" + rand.String(6)
	if err := workload.Client.Create(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = workload.Client.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}) })
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "motd", Namespace: f.ns}, Data: map[string][]byte{"text": []byte("from a secret")}})

	spec := bootstrapv1.KubeadmConfigSpec{}
	spec.JoinConfiguration.NodeRegistration.Name = node
	m, cfg := f.machine("worker", false, spec)
	f.waitForData(cfg)
	f.setNodeRef(m, node)

	desired := cfg.DeepCopy()
	desired.Spec.Files = []upstreambootstrapv1.File{
		{Path: "/etc/inline", Content: "aW5saW5l", Encoding: upstreambootstrapv1.Base64, Permissions: "0600"},
		{Path: "/etc/motd", ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "motd", Key: "text"}}},
	}
	desired.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs = []upstreambootstrapv1.Arg{{Name: "node-labels", Value: ptr.To("tier=a")}}

	call := func(d *bootstrapv1.KubeadmConfig) runtimehooksv1.UpdateMachineResponse {
		t.Helper()
		d.TypeMeta = metav1.TypeMeta{APIVersion: bootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig"}
		var resp runtimehooksv1.UpdateMachineResponse
		callHook(t, runtimehooksv1.UpdateMachine, updateextension.UpdateMachineName, &runtimehooksv1.UpdateMachineRequest{
			Desired: runtimehooksv1.UpdateMachineRequestObjects{
				Machine:         clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}},
				BootstrapConfig: rawObject(mustJSON(t, d)),
			},
		}, &resp)
		return resp
	}
	inProgress := func(resp runtimehooksv1.UpdateMachineResponse) {
		t.Helper()
		if resp.Status != runtimehooksv1.ResponseStatusSuccess || resp.RetryAfterSeconds == 0 {
			t.Fatalf("want in progress, got %s (retry %d): %s", resp.Status, resp.RetryAfterSeconds, resp.Message)
		}
	}

	// The first calls may wait for the cluster cache's connection.
	f.waitFor("the update Pod", 30*time.Second, func() bool {
		inProgress(call(desired))
		return len(updatePods(t, f, node)) > 0
	})
	pod, update := onlyUpdate(t, f, node)
	checkUpdatePod(t, pod, node)
	if len(update.Files) != 2 || string(update.Files[0].Content) != "inline" || update.Files[0].Permissions != "0600" ||
		string(update.Files[1].Content) != "from a secret" || update.ControlPlane {
		t.Errorf("the update's files: %+v", update)
	}
	if len(update.KubeletExtraArgs) != 1 || update.KubeletExtraArgs[0] != (rawv1.Arg{Name: "node-labels", Value: "tier=a"}) {
		t.Errorf("the update's kubelet flags: %+v", update.KubeletExtraArgs)
	}

	// A manager that restarted finds the update where it was.
	stop()
	startManager(t, inPlaceFlags...)
	f.waitFor("the restarted manager to reach the workload cluster", 30*time.Second, func() bool {
		resp := call(desired)
		inProgress(resp)
		return !strings.Contains(resp.Message, "Waiting for the connection")
	})
	if again, _ := onlyUpdate(t, f, node); again.UID != pod.UID {
		t.Fatalf("a second call made Pod %s besides %s", again.Name, pod.Name)
	}

	// The node fails at a step: Failure names it, an event on the Machine
	// too, then a retry runs again.
	finishPod(t, f, pod, corev1.PodFailed, rawv1.NodeUpdateResult{Digest: update.Digest, Step: rawv1.StepFiles, Message: "open /etc/motd: read-only file system"})
	resp := call(desired)
	if resp.Status != runtimehooksv1.ResponseStatusFailure || !strings.Contains(resp.Message, "step files") || !strings.Contains(resp.Message, node) {
		t.Fatalf("a failed update answered %s: %q", resp.Status, resp.Message)
	}
	if n := len(updatePods(t, f, node)); n != 0 {
		t.Fatalf("%d update Pods left after a failure was reported", n)
	}
	f.waitFor("an InPlaceUpdateFailed event on the Machine", 10*time.Second, func() bool { return hasEvent(t, m, bootstrapv1.InPlaceUpdateFailedEvent) })
	inProgress(call(desired))
	pod, _ = onlyUpdate(t, f, node)

	// A new spec supersedes the update in progress.
	newer := desired.DeepCopy()
	newer.Spec.Files[0].Content = "bmV3ZXI="
	resp = call(newer)
	inProgress(resp)
	if !strings.Contains(resp.Message, "earlier update") {
		t.Fatalf("a newer spec started while the earlier update ran: %s", resp.Message)
	}
	// The kubelet stops the earlier Pod; then the newer update starts.
	if err := workload.Client.Delete(f.ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	inProgress(call(newer))
	newPod, newUpdate := onlyUpdate(t, f, node)
	if newPod.Name == pod.Name || string(newUpdate.Files[0].Content) != "newer" {
		t.Fatalf("the newer spec did not replace the update in progress: Pod %s, files %+v", newPod.Name, newUpdate.Files)
	}

	finishPod(t, f, newPod, corev1.PodSucceeded, rawv1.NodeUpdateResult{Digest: newUpdate.Digest})
	if resp := call(newer); resp.Status != runtimehooksv1.ResponseStatusSuccess || resp.RetryAfterSeconds != 0 {
		t.Fatalf("a finished update answered %s (retry %d): %s", resp.Status, resp.RetryAfterSeconds, resp.Message)
	}
	if n := len(updatePods(t, f, node)); n != 0 {
		t.Errorf("%d update Pods left after the update was done", n)
	}
	secrets := &corev1.SecretList{}
	if err := workload.Client.List(f.ctx, secrets, client.InNamespace(rawv1.NodeUpdateNamespace), client.HasLabels{rawv1.NodeUpdateNodeLabel}); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Labels[rawv1.NodeUpdateNodeLabel] == pod.Labels[rawv1.NodeUpdateNodeLabel] {
			t.Errorf("update Secret %s left after the update was done", s.Name)
		}
	}

	// A Pod whose image cannot be pulled fails the update at once, naming
	// the reason; waiting would not help.
	third := newer.DeepCopy()
	third.Spec.Files[0].Content = "dGhpcmQ="
	inProgress(call(third))
	pod, _ = onlyUpdate(t, f, node)
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node-update", Image: nodeUpdateImage,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "registry unreachable"}}}}
	if err := workload.Client.Status().Update(f.ctx, pod); err != nil {
		t.Fatal(err)
	}
	if resp := call(third); resp.Status != runtimehooksv1.ResponseStatusFailure || !strings.Contains(resp.Message, "ImagePullBackOff") {
		t.Errorf("an update whose image cannot be pulled answered %s: %q", resp.Status, resp.Message)
	}
	// The kubelet stops the Pod; meanwhile the update waits, then a retry
	// starts a new Pod.
	left := updatePods(t, f, node)
	if len(left) != 1 || left[0].DeletionTimestamp.IsZero() {
		t.Fatalf("after a failed pull was reported: %d update Pods, want the failed one deleted", len(left))
	}
	if resp := call(third); resp.Status != runtimehooksv1.ResponseStatusSuccess || resp.RetryAfterSeconds == 0 || !strings.Contains(resp.Message, "to stop") {
		t.Errorf("while the failed Pod stops: %s (retry %d): %q", resp.Status, resp.RetryAfterSeconds, resp.Message)
	}
	if err := workload.Client.Delete(f.ctx, &left[0], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	inProgress(call(third))
	if retried, _ := onlyUpdate(t, f, node); retried.UID == left[0].UID {
		t.Error("the retry did not start a new Pod")
	}

	// A Machine without a Node has nothing to update.
	m2, cfg2 := f.machine("unjoined", false, spec)
	f.waitForData(cfg2)
	m = m2
	if resp := call(cfg2); resp.Status != runtimehooksv1.ResponseStatusFailure || !strings.Contains(resp.Message, "no Node") {
		t.Errorf("a Machine without a Node answered %s: %q", resp.Status, resp.Message)
	}
}

// checkUpdatePod checks that an update Pod runs on its node only and holds
// no API credentials.
func checkUpdatePod(t *testing.T, pod *corev1.Pod, node string) {
	t.Helper()
	s := pod.Spec
	if s.NodeName != node || s.RestartPolicy != corev1.RestartPolicyNever || ptr.Deref(s.AutomountServiceAccountToken, true) ||
		len(s.Containers) != 1 || s.Containers[0].Image != nodeUpdateImage {
		t.Errorf("update Pod spec: %+v", s)
	}
	for _, v := range s.Volumes {
		if v.Projected != nil {
			t.Errorf("update Pod has a projected volume (credentials?): %+v", v)
		}
	}
}

// updatePods lists the update Pods of node.
func updatePods(t *testing.T, f *fixture, node string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := workload.Client.List(f.ctx, pods, client.InNamespace(rawv1.NodeUpdateNamespace), client.HasLabels{rawv1.NodeUpdateNodeLabel}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

// onlyUpdate returns node's one update Pod and the NodeUpdate it runs,
// checking that the document holds no credentials.
func onlyUpdate(t *testing.T, f *fixture, node string) (*corev1.Pod, *rawv1.NodeUpdate) {
	t.Helper()
	pods := updatePods(t, f, node)
	if len(pods) != 1 {
		t.Fatalf("%d update Pods for Node %s, want 1", len(pods), node)
	}
	pod := &pods[0]
	sec := &corev1.Secret{}
	if err := workload.Client.Get(f.ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Spec.Volumes[1].Secret.SecretName}, sec); err != nil {
		t.Fatal(err)
	}
	doc := sec.Data[rawv1.NodeUpdateKey]
	for _, secret := range []string{"PRIVATE KEY", "token", "discovery"} {
		if bytes.Contains(doc, []byte(secret)) {
			t.Errorf("the update document holds %q", secret)
		}
	}
	u := &rawv1.NodeUpdate{}
	if err := json.Unmarshal(doc, u); err != nil || u.Kind != rawv1.NodeUpdateKind || u.Digest == "" {
		t.Fatalf("update document %s: %v", doc, err)
	}
	return pod, u
}

// finishPod ends a Pod as the kubelet would, with the executor's result as
// its termination message.
func finishPod(t *testing.T, f *fixture, pod *corev1.Pod, phase corev1.PodPhase, res rawv1.NodeUpdateResult) {
	t.Helper()
	code := int32(0)
	if phase == corev1.PodFailed {
		code = 1
	}
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:  "node-update",
		Image: nodeUpdateImage,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed", Message: string(mustJSON(t, res))}},
	}}
	if err := workload.Client.Status().Update(f.ctx, pod); err != nil {
		t.Fatal(err)
	}
}
