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
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// What every spec is given, as upstream's suite gives it.
var (
	ctx                   = context.Background()
	e2eConfig             *clusterctl.E2EConfig
	clusterctlConfigPath  string
	bootstrapClusterProxy framework.ClusterProxy
	artifactFolder        string
	skipCleanup           bool

	// shared is the stack, in the first parallel process only, and
	// releasesDir where its releases were built.
	shared      *stack.Shared
	releasesDir string
	// labDir is the Lab's state directory, where every process finds the
	// hosts (host.ExecIn).
	labDir string
)

func init() {
	flag.StringVar(&artifactFolder, "e2e.artifacts-folder", "_artifacts", "folder where the specs write their artifacts")
	flag.BoolVar(&skipCleanup, "e2e.skip-resource-cleanup", false, "keep the specs' clusters")
}

// repositorySources is where config/simulated.yaml reads the providers'
// components from, whatever the artifacts folder.
const repositorySources = "_artifacts/repository-sources"

// managerArgs turn on both gated formats.
var managerArgs = []string{"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true"}

// TestMain runs the suite with no stack: the first of the suite's parallel
// processes starts it (SynchronizedBeforeSuite) and every process shares it.
func TestMain(m *testing.M) {
	if !stack.Enter() {
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestCAPIE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrl.SetLogger(GinkgoLogr)
	RunSpecs(t, "Cluster API e2e specs")
}

// inEveryFormat declares the spec once per format, in a container named and
// labelled after the format (with more labels if given).
func inEveryFormat(spec func(f bootstrapv1.Format), labels ...string) {
	inFormats(bootstrapv1.Formats, spec, labels...)
}

// inFormats is inEveryFormat for the formats a spec admits.
func inFormats(formats []bootstrapv1.Format, spec func(f bootstrapv1.Format), labels ...string) {
	for _, f := range formats {
		Context(string(f), Label(append([]string{string(f)}, labels...)...), func() { spec(f) })
	}
}

// suiteState is what the first process hands the others: where the shared
// management cluster, clusterctl repository and hosts are.
type suiteState struct {
	Kubeconfig           string `json:"kubeconfig"`
	ClusterctlConfigPath string `json:"clusterctlConfigPath"`
	ArtifactFolder       string `json:"artifactFolder"`
	LabDir               string `json:"labDir"`
}

// As upstream's suite does, the first process makes the management cluster
// and the clusterctl repository, and every process (the first included)
// connects to them.
var _ = SynchronizedBeforeSuite(func() []byte {
	var err error
	releasesDir, err = os.MkdirTemp("", "releases-")
	Expect(err).NotTo(HaveOccurred())
	rel, opts := suiteReleases()
	shared, err = stack.StartShared(opts)
	Expect(err).NotTo(HaveOccurred())
	folder, err := filepath.Abs(artifactFolder)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.RemoveAll(folder)).To(Succeed())

	By("Writing the providers' components for the clusterctl repository")
	Expect(os.RemoveAll(repositorySources)).To(Succeed())
	Expect(writeRepositorySources(repositorySources, rel)).To(Succeed())

	By("Making the clusterctl local repository")
	configPath := clusterctl.CreateRepository(ctx, clusterctl.CreateRepositoryInput{
		E2EConfig:        loadE2EConfig(),
		RepositoryFolder: filepath.Join(folder, "repository"),
	})
	Expect(amendClusterctlConfig(configPath, rel, shared.Cloud.URL)).To(Succeed())
	Expect(writeAdoptionRepository(folder, rel)).To(Succeed())

	By("Recording the providers in clusterctl's inventory, as clusterctl init does")
	Expect(createInventory(ctx, shared.Client, shared.Kubeconfig, configPath)).To(Succeed())

	state, err := json.Marshal(suiteState{
		Kubeconfig: shared.Kubeconfig, ClusterctlConfigPath: configPath,
		ArtifactFolder: folder, LabDir: shared.Lab.StateDir(),
	})
	Expect(err).NotTo(HaveOccurred())
	return state
}, func(data []byte) {
	var state suiteState
	Expect(json.Unmarshal(data, &state)).To(Succeed())
	e2eConfig = loadE2EConfig()
	clusterctlConfigPath = state.ClusterctlConfigPath
	artifactFolder = state.ArtifactFolder
	labDir = state.LabDir

	scheme := runtime.NewScheme()
	framework.TryAddDefaultSchemes(scheme)
	Expect(infrav1.AddToScheme(scheme)).To(Succeed())
	Expect(eventsv1.AddToScheme(scheme)).To(Succeed())
	bootstrapClusterProxy = framework.NewClusterProxy("management", state.Kubeconfig, scheme,
		framework.WithMachineLogCollector(hostLogCollector{labDir: state.LabDir}))
})

// The first process stops the stack once every process is done.
var _ = SynchronizedAfterSuite(func() {
	if bootstrapClusterProxy != nil {
		bootstrapClusterProxy.Dispose(ctx)
	}
}, func() {
	if releasesDir != "" {
		Expect(os.RemoveAll(releasesDir)).To(Succeed())
	}
	if shared == nil {
		return
	}
	Expect(shared.Stop()).To(Succeed())
})

// A run that failed anywhere keeps the stack's logs.
var _ = ReportAfterSuite("the stack's logs", func(r Report) {
	if shared != nil && r.SuiteSucceeded {
		shared.RemoveState()
	}
})

func loadE2EConfig() *clusterctl.E2EConfig {
	return clusterctl.LoadE2EConfig(ctx, clusterctl.LoadE2EConfigInput{ConfigPath: "config/simulated.yaml"})
}

// Some specs need what the others do without, built only when the label
// filter selects one of them: heavySpecs are their labels by what they need,
// one entry per format, as the spec tree declares them.
var heavySpecs = map[string][]Labels{}

// heavySpec records the labels of a spec with the labels of what it needs,
// run in formats, under each of them, and returns its own: a filter that
// selects the spec by any of its labels gets all it needs.
func heavySpec(spec string, formats []bootstrapv1.Format, needs ...string) Labels {
	for _, need := range needs {
		for _, f := range formats {
			heavySpecs[need] = append(heavySpecs[need], Label(append([]string{spec, string(f)}, needs...)...))
		}
	}
	return Label(append([]string{spec}, needs...)...)
}

// managementSpec records a spec that makes a management cluster with
// clusterctl init: its nodes carry every provider's image, built from source
// (hack/tools.sh upstream-releases, about 16 minutes on empty caches).
func managementSpec(spec string, formats []bootstrapv1.Format) Labels {
	return heavySpec(spec, formats, managementLabel)
}

// upgradeSpec records a spec that upgrades Kubernetes: it boots nodes of
// the previous minor too (hack/tools.sh upgrade-from, about 20 minutes on
// empty caches).
func upgradeSpec(spec string, formats []bootstrapv1.Format) Labels {
	return heavySpec(spec, formats, upgradeLabel)
}

// inPlaceSpec records a spec that updates machines in place: this
// provider's image is built for the hosts, and Cluster API's managers run as
// binaries with the Runtime SDK.
func inPlaceSpec(spec string, formats []bootstrapv1.Format) Labels {
	return heavySpec(spec, formats, inPlaceLabel)
}

// selects says whether the label filter selects a spec that needs what
// the label names.
func selects(needs string) bool {
	for _, l := range heavySpecs[needs] {
		if l.MatchesLabelFilter(GinkgoLabelFilter()) {
			return true
		}
	}
	return false
}

// runTools runs hack/tools.sh with the targets, its progress in the log.
func runTools(targets ...string) {
	cmd := exec.Command(filepath.Join(repodir.Root(), "hack", "tools.sh"), targets...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = repodir.Root(), GinkgoWriter, GinkgoWriter
	Expect(cmd.Run()).To(Succeed())
}

// suiteReleases writes the providers' releases into releasesDir and returns
// the stack's options: with the management machine image and the upgrade's
// node release when a selected spec needs them.
func suiteReleases() (*releases.Releases, stack.Options) {
	opts := stack.Options{ManagerArgs: managerArgs, MachineImages: map[string][]host.ImageArchive{}}
	if selects(inPlaceLabel) {
		By("Building this provider's image, which updates nodes in place")
		image, err := releases.BuildOurImage(filepath.Join(releasesDir, "node-update"))
		Expect(err).NotTo(HaveOccurred())
		opts.MachineImages[releases.NodeUpdateMachineImage] = []host.ImageArchive{image}
		opts.RuntimeSDK = true
		opts.KubernetesBinaries = true
		opts.ManagerArgs = []string{"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true,KubeadmInPlaceUpdates=true",
			"--node-update-image=" + releases.OurImage}
	}
	if selects(upgradeLabel) {
		By("Building the nodes of the release upgrades start from (hack/tools.sh upgrade-from)")
		runTools("upgrade-from")
		opts.OtherReleases = []testbin.Release{testbin.UpgradeFromRelease()}
	}
	if !selects(managementLabel) {
		rel, err := releases.WriteRepository(releasesDir)
		Expect(err).NotTo(HaveOccurred())
		return rel, opts
	}
	By("Building every provider's image and cert-manager's (hack/tools.sh upstream-releases)")
	runTools("upstream-releases")
	rel, err := releases.Build(releasesDir)
	Expect(err).NotTo(HaveOccurred())
	opts.MachineImages[releases.MachineImage] = rel.Images
	return rel, opts
}
