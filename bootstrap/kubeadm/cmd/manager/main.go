// Command manager runs the kubeadm bootstrap provider: a controller-runtime
// manager serving health probes, metrics and (once registered) admission
// webhooks for KubeadmConfig and KubeadmConfigTemplate.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/manager"
)

func main() {
	if err := manager.Run(ctrl.SetupSignalHandler(), os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		os.Exit(1)
	}
}
