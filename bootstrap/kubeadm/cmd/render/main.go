// Command render prints the bootstrap data a machine would receive for a
// KubeadmConfig, offline: see `render --help` and the README.
package main

import (
	"os"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/rendercli"
)

func main() {
	os.Exit(rendercli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
