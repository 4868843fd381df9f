package e2e

import (
	"testing"
	"time"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// TestCloudConfigCluster: one cloud-config control plane, two cloud-config
// workers; cloud-init runs each machine's data, kubeadm inits and joins.
func TestCloudConfigCluster(t *testing.T) {
	w := newWorkloadCluster(t, "cloud-config")
	w.controlPlaneMachine("cloud-config-cp-0", bootstrapv1.CloudConfig)
	w.machineDeployment("cloud-config-md", bootstrapv1.CloudConfig, 2, 0)
	machines := w.waitForMachines(3, 5*time.Minute)
	w.expectNodes(machines)
}
