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

// Package e2e proves the provider with Cluster API's own controllers: every
// machine's bootstrap data is run by its format's real consumer on a
// simulated host, real kubeadm brings up a real workload control plane, and
// workers really join it (see test/e2e/stack and
// test/infrastructure/simulated).
package e2e

import (
	"os"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
)

// st is the stack every test of the package shares.
var st *stack.Stack

// managerArgs turn on both gated formats and in-place updates, whose Pods
// run the release's image.
var managerArgs = []string{
	"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true,KubeadmInPlaceUpdates=true",
	"--node-update-image=" + releases.OurImage,
}

func TestMain(m *testing.M) {
	os.Exit(stack.Run(stack.RunInput{M: m, ManagerArgs: managerArgs, Setup: func(s *stack.Stack) { st = s }}))
}
