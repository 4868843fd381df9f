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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/framework"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// managementImage is the machine image of a management cluster's nodes: the
// node image with the releases' images and this provider's in its store.
const managementImage = "management"

// managerImage is this provider's image as make image tags it by default.
const managerImage = "ghcr.io/cabpk-formats/cluster-api-kubeadm-bootstrap-controller:v0.1.0"

var (
	// st is the stack the package's host tests share.
	st *stack.Stack
	// imageDir holds this provider's image tarball while the stack runs.
	imageDir string
)

func TestMain(m *testing.M) {
	code := framework.Run(framework.RunInput{M: m, MachineImages: machineImages, Setup: func(s *stack.Stack) { st = s }})
	if imageDir != "" {
		_ = os.RemoveAll(imageDir)
	}
	os.Exit(code)
}

// machineImages gives the Lab the management machine image: the releases'
// images and this provider's, built from this tree as make image builds it.
func machineImages() (map[string][]host.ImageArchive, error) {
	releases, err := testbin.LoadUpstreamReleases()
	if err != nil {
		return nil, err
	}
	archives := make([]host.ImageArchive, 0, len(releases.Images)+1)
	for _, i := range releases.Images {
		archives = append(archives, host.ImageArchive{Ref: i.Ref, Path: filepath.Join(releases.Dir, i.File)})
	}
	ours, err := buildManagerImage()
	if err != nil {
		return nil, err
	}
	return map[string][]host.ImageArchive{managementImage: append(archives, ours)}, nil
}

// buildManagerImage runs the release tool for this machine's platform.
func buildManagerImage() (host.ImageArchive, error) {
	var err error
	if imageDir, err = os.MkdirTemp("", "manager-image-"); err != nil {
		return host.ImageArchive{}, err
	}
	cmd := exec.Command("go", "run", "./hack/release", "--image-only", "--out", imageDir,
		"--registry", "ghcr.io/cabpk-formats", "--tag", "v0.1.0", "--platforms", "linux/"+runtime.GOARCH)
	cmd.Dir = repodir.Root()
	if b, err := cmd.CombinedOutput(); err != nil {
		return host.ImageArchive{}, fmt.Errorf("building this provider's image: %w\n%s", err, b)
	}
	return host.ImageArchive{Ref: managerImage, Path: filepath.Join(imageDir, "cluster-api-kubeadm-bootstrap-controller-"+runtime.GOARCH+".tar")}, nil
}
