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

package stack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WorkloadKubeconfig is the admin kubeconfig Cluster API wrote for a
// workload cluster.
func WorkloadKubeconfig(ctx context.Context, c client.Client, namespace, cluster string) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster + "-kubeconfig"}, secret); err != nil {
		return nil, err
	}
	return secret.Data["value"], nil
}

// WorkloadStatus says how many of a workload cluster's Nodes are Ready and
// how many of its pods run Ready; done when all are.
type WorkloadStatus struct {
	Nodes, NodesReady, Pods, PodsReady int
}

// Done is true when every Node is Ready and every pod runs Ready.
func (s WorkloadStatus) Done(wantNodes int) bool {
	return s.Nodes == wantNodes && s.NodesReady == s.Nodes && s.Pods > 0 && s.PodsReady == s.Pods
}

func (s WorkloadStatus) String() string {
	return fmt.Sprintf("nodes Ready %d/%d, pods Running and Ready %d/%d", s.NodesReady, s.Nodes, s.PodsReady, s.Pods)
}

// ReadWorkloadStatus reads a workload cluster's Nodes and pods.
func ReadWorkloadStatus(ctx context.Context, kubeconfig []byte) (WorkloadStatus, error) {
	var s WorkloadStatus
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return s, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return s, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	for _, n := range nodes.Items {
		s.Nodes++
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				s.NodesReady++
			}
		}
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	for _, p := range pods.Items {
		s.Pods++
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				s.PodsReady++
			}
		}
	}
	return s, nil
}
