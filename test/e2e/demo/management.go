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

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// managementBootTimeout bounds the management cluster's boot: one node,
// warm, takes under a minute.
const managementBootTimeout = 5 * time.Minute

// bootManagementCluster boots the quick start's management cluster: a
// one-node kubeadm cluster on a lab host, from the machine image that holds
// every provider's image (no registry serves them). Its control-plane node
// keeps no taint, as a kind cluster's does, so the providers run there. The
// stack's own management cluster makes it, as Cluster API would; the demo
// returns the path of its admin kubeconfig once the node is Ready.
func bootManagementCluster(ctx context.Context, s *stack.Stack, dir string, p *progress) (string, error) {
	p.sayf("booting the management cluster: a one-node kubeadm cluster on a lab host, where the quick start runs kind")
	c := objects.Cluster{Namespace: "lab", Name: "management"}
	objects := append(c.Base(), c.ControlPlaneMachine(c.Name+"-0", bootstrapv1.CloudConfig, func(s *bootstrapv1.KubeadmConfigSpec) {
		s.InitConfiguration.NodeRegistration.Taints = ptr.To([]corev1.Taint{})
	})...)
	for _, o := range objects {
		if m, ok := o.(*infrav1.SimulatedMachine); ok {
			m.Spec.Image = releases.MachineImage
		}
		if err := s.Client.Create(ctx, o); err != nil {
			return "", fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	var kubeconfig []byte
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, managementBootTimeout, true, func(ctx context.Context) (bool, error) {
		if !machinesDone(ctx, s.Client, c.Namespace, 1) {
			return false, nil
		}
		var err error
		if kubeconfig, err = stack.WorkloadKubeconfig(ctx, s.Client, c.Namespace, c.Name); err != nil {
			return false, nil //nolint:nilerr // Cluster API writes it soon after.
		}
		status, err := stack.ReadWorkloadStatus(ctx, kubeconfig)
		return err == nil && status.Done(1), nil
	})
	if err != nil {
		return "", fmt.Errorf("the management cluster's node is not Ready after %s: %w (logs in %s)", managementBootTimeout, err, dir)
	}
	path := filepath.Join(dir, "management.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return "", err
	}
	p.sayf("the management cluster's node is Ready")
	return path, nil
}

// machinesDone says whether want Machines of the namespace run with a Node.
func machinesDone(ctx context.Context, c client.Client, namespace string, want int) bool {
	rows, err := stack.MachineTable(ctx, c, namespace)
	return err == nil && len(rows) == want && stack.CountDone(rows) == want
}
