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
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	e2eframework "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/framework"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// What every spec is given, as upstream's suite gives it.
var (
	ctx                   = context.Background()
	e2eConfig             *clusterctl.E2EConfig
	clusterctlConfigPath  string
	bootstrapClusterProxy framework.ClusterProxy
	artifactFolder        string
	skipCleanup           bool

	st *stack.Stack
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

func TestMain(m *testing.M) {
	os.Exit(e2eframework.Run(e2eframework.RunInput{M: m, ManagerArgs: managerArgs, Setup: func(s *stack.Stack) { st = s }}))
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

var _ = BeforeSuite(func() {
	var err error
	artifactFolder, err = filepath.Abs(artifactFolder)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.RemoveAll(artifactFolder)).To(Succeed())

	By("Writing the providers' components for the clusterctl repository")
	Expect(os.RemoveAll(repositorySources)).To(Succeed())
	Expect(writeRepositorySources(repositorySources)).To(Succeed())

	By("Loading the e2e config and making the clusterctl local repository")
	e2eConfig = clusterctl.LoadE2EConfig(ctx, clusterctl.LoadE2EConfigInput{ConfigPath: "config/simulated.yaml"})
	clusterctlConfigPath = clusterctl.CreateRepository(ctx, clusterctl.CreateRepositoryInput{
		E2EConfig:        e2eConfig,
		RepositoryFolder: filepath.Join(artifactFolder, "repository"),
	})

	By("Recording the providers in clusterctl's inventory, as clusterctl init does")
	Expect(createInventory(ctx, st.Client, st.Kubeconfig, clusterctlConfigPath)).To(Succeed())

	scheme := runtime.NewScheme()
	framework.TryAddDefaultSchemes(scheme)
	Expect(infrav1.AddToScheme(scheme)).To(Succeed())
	bootstrapClusterProxy = framework.NewClusterProxy("management", st.Kubeconfig, scheme,
		framework.WithMachineLogCollector(hostLogCollector{lab: st.Lab}))
})

var _ = AfterSuite(func() {
	if bootstrapClusterProxy != nil {
		bootstrapClusterProxy.Dispose(ctx)
	}
})
