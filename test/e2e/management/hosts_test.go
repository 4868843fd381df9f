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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/framework"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// TestNodesCarryTheReleases boots a node from the management machine image
// and runs Cluster API's manager image and this provider's there as Pods, as
// a management cluster's node does with no registry to pull from: the images
// are in the node's store, and their binaries run as their Deployments run
// them (non-root, read-only root file system).
func TestNodesCarryTheReleases(t *testing.T) {
	w := framework.NewCluster(t, framework.ClusterInput{Stack: st, Name: "carries-releases"})
	objects := w.ControlPlaneMachine("carries-releases-cp-0", bootstrapv1.CloudConfig)
	for _, o := range objects {
		if sm, ok := o.(*infrav1.SimulatedMachine); ok {
			sm.Spec.Image = managementImage
		}
	}
	w.Create(objects...)
	w.ExpectNodes(w.WaitForMachines(1, 5*time.Minute))

	releases, err := testbin.LoadUpstreamReleases()
	if err != nil {
		t.Fatal(err)
	}
	store := w.OnHost("carries-releases-cp-0", "ctr", "--namespace", "k8s.io", "images", "list", "--quiet")
	for _, i := range releases.Images {
		if !strings.Contains(store, i.Ref) {
			t.Errorf("the node's image store lacks %s", i.Ref)
		}
	}

	for _, image := range []string{releases.Images[0].Ref, managerImage} {
		if !strings.Contains(store, image) {
			t.Errorf("the node's image store lacks %s", image)
			continue
		}
		runUsage(t, w, image)
	}
}

// runUsage runs an image's entrypoint with --help as a Pod on the cluster's
// node, with the security context the managers' Deployments set.
func runUsage(t *testing.T, w *framework.WorkloadCluster, image string) {
	t.Helper()
	phase, logs := w.RunPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "usage-", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "manager", Image: image, ImagePullPolicy: corev1.PullNever, Args: []string{"--help"},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		},
	})
	if phase != corev1.PodSucceeded {
		t.Errorf("a Pod of %s on the node ended %s:\n%s", image, phase, logs)
	}
}
