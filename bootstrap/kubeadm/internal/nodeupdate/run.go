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

package nodeupdate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
)

// State is where an update stands.
type State string

const (
	InProgress State = "InProgress"
	Done       State = "Done"
	Failed     State = "Failed"
)

// Status is an update's state; Message says what happens or what failed,
// without file contents, tokens or keys.
type Status struct {
	State   State
	Message string
}

// maxMessage bounds what a node's result may put into a condition.
const maxMessage = 512

// Runner runs updates on nodes with Pods of Image.
type Runner struct {
	Image string
}

// Run moves the update of node along and says where it stands. Each call
// reads the state from the workload cluster: the first creates the Secret
// and the Pod; later ones read how the Pod ended and then remove both, so a
// retry after a failure runs the update again.
func (r Runner) Run(ctx context.Context, c client.Client, node string, u *rawv1.NodeUpdate, doc []byte) (Status, error) {
	if err := c.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{}); err != nil {
		if apierrors.IsNotFound(err) {
			return Status{State: Failed, Message: fmt.Sprintf("Node %s is not in the workload cluster", node)}, nil
		}
		return Status{}, fmt.Errorf("reading Node %s: %w", node, err)
	}
	name := objectName(node, u.Digest)
	pod := &corev1.Pod{}
	err := c.Get(ctx, client.ObjectKey{Namespace: rawv1.NodeUpdateNamespace, Name: name}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return r.start(ctx, c, node, name, doc)
	case err != nil:
		return Status{}, fmt.Errorf("reading Pod %s: %w", name, err)
	}
	if !pod.DeletionTimestamp.IsZero() {
		// Its end was reported; the kubelet stops it, then a retry starts
		// a new one.
		return Status{State: InProgress, Message: fmt.Sprintf("Waiting for the earlier update Pod of Node %s to stop", node)}, nil
	}
	st := podStatus(pod, u.Digest)
	if st.State == InProgress {
		return st, nil
	}
	if err := remove(ctx, c, name); err != nil {
		return Status{}, err
	}
	return st, nil
}

// start starts this update once earlier updates of the node have stopped.
func (r Runner) start(ctx context.Context, c client.Client, node, name string, doc []byte) (Status, error) {
	running, err := stopOthers(ctx, c, node, name)
	if err != nil {
		return Status{}, err
	}
	if running > 0 {
		// Two updates must never write the same node at once.
		return Status{State: InProgress, Message: fmt.Sprintf("Waiting for an earlier update of Node %s to stop", node)}, nil
	}
	labels := map[string]string{rawv1.NodeUpdateNodeLabel: nodeHash(node)}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: rawv1.NodeUpdateNamespace, Name: name, Labels: labels},
		Data:       map[string][]byte{rawv1.NodeUpdateKey: doc},
	}
	if err := c.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return Status{}, fmt.Errorf("creating Secret %s: %w", name, err)
	}
	if err := c.Create(ctx, r.pod(node, name, labels)); err != nil && !apierrors.IsAlreadyExists(err) {
		return Status{}, fmt.Errorf("creating Pod %s: %w", name, err)
	}
	return Status{State: InProgress, Message: fmt.Sprintf("Updating Node %s in place", node)}, nil
}

// pod runs the update on node and nothing else: no API credentials (the
// document comes as a volume the kubelet mounts for this Pod only), the
// node's root file system and namespaces, since it changes the node itself.
func (r Runner) pod(node, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rawv1.NodeUpdateNamespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			HostPID:                      true,
			HostNetwork:                  true,
			PriorityClassName:            "system-node-critical",
			Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:    "node-update",
				Image:   r.Image,
				Command: []string{rawv1.NodeUpdaterCommand},
				Args: []string{
					"--root=" + rawv1.NodeUpdateHostPath,
					"--update=" + path.Join(rawv1.NodeUpdateMountPath, rawv1.NodeUpdateKey),
				},
				SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0)},
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				VolumeMounts: []corev1.VolumeMount{
					{Name: "host", MountPath: rawv1.NodeUpdateHostPath},
					{Name: "update", MountPath: rawv1.NodeUpdateMountPath, ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/", Type: ptr.To(corev1.HostPathDirectory)}}},
				{Name: "update", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name, DefaultMode: ptr.To[int32](0o400)}}},
			},
		},
	}
}

// podStatus reads how the update's Pod stands. A Pod that cannot start
// (its image cannot be pulled) has failed too: waiting would not help.
func podStatus(pod *corev1.Pod, digest string) Status {
	var cs *corev1.ContainerStatus
	if len(pod.Status.ContainerStatuses) > 0 {
		cs = &pod.Status.ContainerStatuses[0]
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return Status{State: Done, Message: fmt.Sprintf("Node %s updated in place", pod.Spec.NodeName)}
	case corev1.PodFailed:
		return Status{State: Failed, Message: failure(pod.Spec.NodeName, cs, digest)}
	}
	if cs != nil && cs.State.Waiting != nil {
		switch cs.State.Waiting.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError":
			return Status{State: Failed, Message: fmt.Sprintf("the update of Node %s cannot start: %s", pod.Spec.NodeName, cs.State.Waiting.Reason)}
		}
	}
	return Status{State: InProgress, Message: fmt.Sprintf("Updating Node %s in place (Pod %s)", pod.Spec.NodeName, pod.Status.Phase)}
}

// failure is what a failed Pod reported: the step and the node's message
// when it wrote a result for this update, its exit code otherwise.
func failure(node string, cs *corev1.ContainerStatus, digest string) string {
	if cs == nil || cs.State.Terminated == nil {
		return fmt.Sprintf("the update of Node %s failed before it ran", node)
	}
	t := cs.State.Terminated
	var res rawv1.NodeUpdateResult
	if err := json.Unmarshal([]byte(t.Message), &res); err != nil || res.Digest != digest || res.Step == "" {
		return fmt.Sprintf("the update of Node %s exited with code %d", node, t.ExitCode)
	}
	msg := fmt.Sprintf("the update of Node %s failed at step %s: %s", node, res.Step, res.Message)
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	return msg
}

// remove deletes an update's Pod and Secret. The API server removes a
// finished Pod at once; the kubelet stops one that never started.
func remove(ctx context.Context, c client.Client, name string) error {
	meta := metav1.ObjectMeta{Namespace: rawv1.NodeUpdateNamespace, Name: name}
	for _, o := range []client.Object{&corev1.Pod{ObjectMeta: meta}, &corev1.Secret{ObjectMeta: meta}} {
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing %T %s: %w", o, name, err)
		}
	}
	return nil
}

// stopOthers deletes what updates of node other than name left (an update
// a newer spec superseded, or one whose answer was lost) and returns how
// many of their Pods still run: the kubelet stops them first.
func stopOthers(ctx context.Context, c client.Client, node, name string) (int, error) {
	sel := client.MatchingLabels{rawv1.NodeUpdateNodeLabel: nodeHash(node)}
	in := client.InNamespace(rawv1.NodeUpdateNamespace)
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, in, sel); err != nil {
		return 0, fmt.Errorf("listing the update Pods of Node %s: %w", node, err)
	}
	others := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Name == name {
			continue
		}
		others[p.Name] = true
		if p.DeletionTimestamp.IsZero() {
			if err := c.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("stopping Pod %s: %w", p.Name, err)
			}
		}
	}
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.List(ctx, secrets, in, sel); err != nil {
		return 0, fmt.Errorf("listing the update Secrets of Node %s: %w", node, err)
	}
	for _, s := range secrets.Items {
		if s.Name == name || others[s.Name] {
			continue
		}
		if err := c.Delete(ctx, &corev1.Secret{ObjectMeta: s.ObjectMeta}); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("removing Secret %s: %w", s.Name, err)
		}
	}
	if len(others) == 0 {
		return 0, nil
	}
	// A Pod that has finished goes at once; the API server says which
	// are gone.
	left := &corev1.PodList{}
	if err := c.List(ctx, left, in, sel); err != nil {
		return 0, fmt.Errorf("listing the update Pods of Node %s: %w", node, err)
	}
	running := 0
	for _, p := range left.Items {
		if p.Name != name {
			running++
		}
	}
	return running, nil
}

// objectName names an update's Secret and Pod after the node and the
// document: one name per state the node is led to.
func objectName(node, digest string) string {
	return "node-update-" + nodeHash(node)[:16] + "-" + digest[:16]
}

// nodeHash is a label-safe stand-in for a node's name.
func nodeHash(node string) string {
	sum := sha256.Sum256([]byte(node))
	return hex.EncodeToString(sum[:])[:63]
}
