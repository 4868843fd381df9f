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

// Command manifest writes cert-manager's install manifest as cert-manager's
// release writes cert-manager.yaml: its Helm chart rendered at the release's
// version with its CRDs for the namespace cert-manager, and that namespace
// before everything else. clusterctl installs it.
//
//	manifest --chart <module>/deploy/charts/cert-manager --version v1.21.1 \
//	  --kube-version v1.36.3 --out cert-manager.yaml
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

const namespace = "cert-manager"

// values are the release's own settings: CRDs in the manifest, no start-up
// check Job (clusterctl checks by itself that cert-manager answers), and the
// labels of a static manifest rather than of a Helm release.
var values = map[string]any{
	"creator":         "static",
	"crds":            map[string]any{"enabled": true},
	"startupapicheck": map[string]any{"enabled": false},
}

func main() {
	chartDir := flag.String("chart", "", "directory of cert-manager's chart (deploy/charts/cert-manager in its module)")
	version := flag.String("version", "", "cert-manager's version: the chart's, and its images' tag")
	kubeVersion := flag.String("kube-version", "", "Kubernetes version the chart's checks see")
	out := flag.String("out", "cert-manager.yaml", "file to write")
	flag.Parse()
	if err := run(*chartDir, *version, *kubeVersion, *out); err != nil {
		fmt.Fprintf(os.Stderr, "manifest: %v\n", err)
		os.Exit(1)
	}
}

func run(chartDir, version, kubeVersion, out string) error {
	if version == "" {
		return fmt.Errorf("--version is required")
	}
	kube, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return fmt.Errorf("--kube-version: %w", err)
	}
	chart, err := loader.Load(chartDir)
	if err != nil {
		return fmt.Errorf("loading the chart: %w", err)
	}
	// cert-manager's release stamps its version into the chart it renders;
	// the images' tags come from it.
	chart.Metadata.Version, chart.Metadata.AppVersion = version, version
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace, install.IncludeCRDs = true, true, true, true
	install.ReleaseName, install.Namespace = namespace, namespace
	install.KubeVersion = kube
	release, err := install.Run(chart, values)
	if err != nil {
		return fmt.Errorf("rendering the chart: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", namespace)
	b.WriteString(release.Manifest)
	return os.WriteFile(out, b.Bytes(), 0o644)
}
