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
	"os"
	"path/filepath"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/framework"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// managementImage is the machine image of a management cluster's nodes: the
// node image with the releases' images in its store.
const managementImage = "management"

// st is the stack the package's host tests share.
var st *stack.Stack

func TestMain(m *testing.M) {
	os.Exit(framework.Run(framework.RunInput{M: m, MachineImages: machineImages, Setup: func(s *stack.Stack) { st = s }}))
}

// machineImages gives the Lab the management machine image.
func machineImages() (map[string][]host.ImageArchive, error) {
	releases, err := testbin.LoadUpstreamReleases()
	if err != nil {
		return nil, err
	}
	archives := make([]host.ImageArchive, 0, len(releases.Images))
	for _, i := range releases.Images {
		archives = append(archives, host.ImageArchive{Ref: i.Ref, Path: filepath.Join(releases.Dir, i.File)})
	}
	return map[string][]host.ImageArchive{managementImage: archives}, nil
}
