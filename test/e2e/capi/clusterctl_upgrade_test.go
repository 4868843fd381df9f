//go:build e2e

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

package capi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/capi/flavors"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
)

// A workload cluster on the management machine image becomes a management
// cluster with upstream's kubeadm bootstrap provider; it makes a workload
// cluster of its own; then clusterctl upgrade replaces upstream's provider
// with this one. The workload cluster must keep its Machines, scale, and
// settle (ValidateResourceVersionStable).
var _ = Describe("Cluster API's clusterctl upgrade", managementSpec("ClusterctlUpgrade", clusterctlUpgradeFormats), func() {
	inFormats(clusterctlUpgradeFormats, clusterctlUpgrade)
})

// clusterctlUpgradeFormats: upstream's provider makes the workload cluster
// before the upgrade, and it knows only cloud-config.
var clusterctlUpgradeFormats = []bootstrapv1.Format{bootstrapv1.CloudConfig}

func clusterctlUpgrade(f bootstrapv1.Format) {
	var clusterctlURL, configPath string

	BeforeEach(func() {
		clusterctlURL = serveClusterctl()
		configPath = filepath.Join(GinkgoT().TempDir(), "clusterctl.yaml")
		Expect(editClusterctlConfig(clusterctlConfigPath, configPath, func(cfg map[string]any) error {
			return setProviderURL(cfg, "kubeadm", clusterctlv1.BootstrapProviderType, adoptionBootstrapURL(artifactFolder))
		})).To(Succeed())
	})

	capie2e.ClusterctlUpgradeSpec(ctx, func() capie2e.ClusterctlUpgradeSpecInput {
		return capie2e.ClusterctlUpgradeSpecInput{
			E2EConfig:                  e2eConfig,
			ClusterctlConfigPath:       configPath,
			BootstrapClusterProxy:      bootstrapClusterProxy,
			ArtifactFolder:             artifactFolder,
			SkipCleanup:                skipCleanup,
			InitWithBinary:             clusterctlURL,
			InitWithKubernetesVersion:  e2eConfig.MustGetVariable(capie2e.KubernetesVersion),
			InitWithBootstrapProviders: []string{"kubeadm:" + testbin.Versions["CLUSTER_API_VERSION"]},
			MgmtFlavor:                 flavors.FlavorName("self-hosted", f),
			WorkloadFlavor:             flavors.FlavorName("", f),
			PreUpgrade: func(proxy framework.ClusterProxy) {
				expectBootstrapImage(proxy, releases.UpstreamBootstrapImage())
			},
			Upgrades: []capie2e.ClusterctlUpgradeSpecInputUpgrade{{
				BootstrapProviders: []string{stack.ProviderNamespace + "/kubeadm:" + adoptionVersion},
				PostUpgrade: func(proxy framework.ClusterProxy, _, _ string) {
					expectBootstrapImage(proxy, releases.OurImage)
				},
			}},
		}
	})
}

// expectBootstrapImage checks that the management cluster's kubeadm
// bootstrap provider runs image and nothing else.
func expectBootstrapImage(proxy framework.ClusterProxy, image string) {
	By("Checking that the kubeadm bootstrap provider runs " + image)
	var deployments appsv1.DeploymentList
	Expect(proxy.GetClient().List(ctx, &deployments, client.InNamespace(stack.ProviderNamespace))).To(Succeed())
	var images []string
	for _, d := range deployments.Items {
		for _, c := range d.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
	}
	Expect(images).To(ConsistOf(image), "the images of the Deployments in %s", stack.ProviderNamespace)
}

// serveClusterctl serves the clusterctl of the tool cache over loopback
// HTTP, where the spec downloads the clusterctl it initialises with.
func serveClusterctl() string {
	path := testbin.MustPath(GinkgoT(), testbin.Clusterctl)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/clusterctl-"+runtime.GOOS+"-"+runtime.GOARCH {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, path)
	}))
	DeferCleanup(srv.Close)
	return srv.URL + "/clusterctl-{OS}-{ARCH}"
}

// adoptionVersion files this provider's release in the adoption repository
// as a kubeadm bootstrap provider version newer than upstream's: clusterctl
// upgrade moves a provider only along its repository's versions, at most
// three minors at a time, and this provider's own version
// (releases.OurVersion) sorts below upstream's. The pre-release names it;
// it is no release of upstream's.
var adoptionVersion = "v1.15.0-cabpk-formats." + strings.TrimPrefix(releases.OurVersion, "v")

// adoptionRepository is the spec's clusterctl repository of the kubeadm
// bootstrap provider: upstream's release at its version, and this
// provider's at adoptionVersion.
func adoptionRepository(folder string) string {
	return filepath.Join(folder, "repository-adoption")
}

// adoptionBootstrapURL is the clusterctl provider URL of adoptionRepository.
func adoptionBootstrapURL(folder string) string {
	return filepath.Join(adoptionRepository(folder), releases.BootstrapLabel, "latest", "components.yaml")
}

// writeAdoptionRepository fills adoptionRepository from the releases. The
// metadata filed with this provider's components is its own with the two
// release series clusterctl looks for: upstream's installed one and
// adoptionVersion's.
func writeAdoptionRepository(folder string, r *releases.Releases) error {
	upstream := testbin.Versions["CLUSTER_API_VERSION"]
	if err := copyRelease(r, upstream, upstream, folder); err != nil {
		return err
	}
	if err := copyRelease(r, releases.OurVersion, adoptionVersion, folder); err != nil {
		return err
	}
	return addReleaseSeries(filepath.Join(adoptionRepository(folder), releases.BootstrapLabel, adoptionVersion, "metadata.yaml"), upstream, adoptionVersion)
}

// copyRelease copies the kubeadm bootstrap provider's release at version in
// the releases to as in adoptionRepository.
func copyRelease(r *releases.Releases, version, as, folder string) error {
	return copyComponents(filepath.Join(r.Repository, releases.BootstrapLabel, version, "bootstrap-components.yaml"),
		filepath.Join(adoptionRepository(folder), releases.BootstrapLabel, as))
}

// addReleaseSeries adds to the clusterctl metadata at path the release
// series of versions, with the contract of this provider's.
func addReleaseSeries(path string, versions ...string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	md := &clusterctlv1.Metadata{}
	if err := yaml.UnmarshalStrict(b, md); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ours := md.GetReleaseSeriesForVersion(version.MustParseSemantic(releases.OurVersion))
	if ours == nil {
		return fmt.Errorf("%s: no release series of %s", path, releases.OurVersion)
	}
	contract := ours.Contract
	for _, v := range versions {
		sv := version.MustParseSemantic(v)
		md.ReleaseSeries = append(md.ReleaseSeries, clusterctlv1.ReleaseSeries{Major: int32(sv.Major()), Minor: int32(sv.Minor()), Contract: contract})
	}
	if b, err = yaml.Marshal(md); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
