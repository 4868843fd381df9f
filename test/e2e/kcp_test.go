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
	"testing"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/workload"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// TestKCPCloudConfigScales: a KubeadmControlPlane of cloud-config machines
// scaled 1 → 3 → 1; etcd's members follow, and KCP makes no rollout of its
// own at steady state.
func TestKCPCloudConfigScales(t *testing.T) {
	t.Parallel()
	kcpScales(t, kcpScalesInput{Name: "kcp-cloud-config", Format: bootstrapv1.CloudConfig, Remediate: true, ScaleDown: true})
}

// TestKCPRawScales: the same with raw control planes, chosen by the format
// annotation on KCP's machine template (KCP's own spec cannot say raw), up to
// 3 only: removing members is KCP's work, whatever the format, and
// TestKCPCloudConfigScales proves it.
func TestKCPRawScales(t *testing.T) {
	t.Parallel()
	kcpScales(t, kcpScalesInput{Name: "kcp-raw", Format: bootstrapv1.Raw, SteadyResyncs: 2})
}

// kcpScalesInput says what kcpScales does.
type kcpScalesInput struct {
	Name   string
	Format bootstrapv1.Format
	// SteadyResyncs is how many of Cluster API's resyncs at 3 replicas are
	// watched for a KubeadmControlPlane rollout (the format annotation's
	// case: what KCP compares must be what it wrote).
	SteadyResyncs int
	// Remediate has KCP replace an unhealthy machine at 3 replicas.
	Remediate bool
	// ScaleDown scales back to 1.
	ScaleDown bool
}

// kcpScales scales a KubeadmControlPlane 1 → 3 (→ 1).
func kcpScales(t *testing.T, in kcpScalesInput) {
	w := workload.NewKCPCluster(t, workload.KCPClusterInput{Stack: st, Name: in.Name, Replicas: 1, Format: in.Format})
	machines := w.WaitForMachines(1, 5*time.Minute)
	w.ExpectNodes(machines)
	w.ExpectEtcdMembers()
	w.ExpectConsumers(in.Format)

	w.ScaleKCP(3)
	machines = w.WaitForMachines(3, 10*time.Minute)
	w.ExpectNodes(machines)
	w.ExpectEtcdMembers()
	w.ExpectEachAPIServerWithItsEtcd(3)
	w.ExpectRendered(in.Format)
	w.ExpectNoKCPRollout(3, in.SteadyResyncs)
	if in.Remediate {
		w.ExpectRemediation(in.Format, machines)
	}
	if !in.ScaleDown {
		return
	}

	w.ScaleKCP(1)
	machines = w.WaitForMachines(1, 10*time.Minute)
	w.ExpectNodes(machines)
	w.ExpectEtcdMembers()
	w.ExpectEachAPIServerWithItsEtcd(1)
}
