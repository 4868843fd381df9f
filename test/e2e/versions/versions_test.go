//go:build versionmatrix

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

package versions

import (
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/workload"
)

// st is the stack the package's tests share.
var st *stack.Stack

// brokenPreflightChecks are kubeadm's preflight checks that fail, by minor,
// only because this machine builds old kubeadm with a newer Go than its
// release did: kubeadm v1.31's HTTPProxyCIDR check parses a URL with an IPv4
// address in brackets ("https://[10.96.0.1]:1234/"), which the net/url of
// this machine's Go refuses as an invalid IP literal (later kubeadm writes
// none).
var brokenPreflightChecks = map[string][]string{"v1.31": {"HTTPProxyCIDR"}}

// minorOf is v1.31 for v1.31.4.
func minorOf(version string) string {
	return version[:strings.LastIndex(version, ".")]
}

// ends are the releases of the supported range's oldest and newest minors.
var ends = []testbin.Release{testbin.OldestRelease(), testbin.NewestRelease()}

func TestMain(m *testing.M) {
	os.Exit(stack.Run(stack.RunInput{M: m, OtherReleases: ends, Setup: func(s *stack.Stack) { st = s }}))
}

// TestRangeEndsBoot: for the oldest and the newest supported minor, a
// KubeadmControlPlane machine and a MachineDeployment worker of that version,
// in cloud-config, boot on nodes of that release (its kubelet, kubeadm,
// etcd, CoreDNS and kube-proxy); a pod on the worker finds a Service through
// CoreDNS and reaches a pod on the control plane.
func TestRangeEndsBoot(t *testing.T) {
	for _, r := range ends {
		t.Run(r.Kubernetes, func(t *testing.T) {
			t.Parallel()
			name := "k8s-" + strings.ReplaceAll(strings.TrimPrefix(r.Kubernetes, "v"), ".", "-")
			w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Name: name, Version: r.Kubernetes,
				Objects: func(w *workload.Cluster) []client.Object {
					objects := w.Objects.KCPBase(1, bootstrapv1.CloudConfig)
					for _, o := range objects {
						if kcp, ok := o.(*controlplanev1.KubeadmControlPlane); ok {
							init := &kcp.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration
							init.IgnorePreflightErrors = append(init.IgnorePreflightErrors, brokenPreflightChecks[minorOf(r.Kubernetes)]...)
						}
					}
					return objects
				}})
			w.AddMachineDeployment(name+"-md", bootstrapv1.CloudConfig, 1, 0)
			machines := w.WaitForMachines(2, 10*time.Minute)
			w.ExpectNodes(machines) // each node's kubelet at its Machine's version
			var controlPlane string
			for _, m := range machines {
				if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
					controlPlane = m.Status.NodeRef.Name
				}
			}
			w.ExpectPodNetwork(controlPlane, w.WorkerMachine(name+"-md").Status.NodeRef.Name)
		})
	}
}
