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

package rendercli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/raw"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/rendercli"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/hostile"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlsize"
)

func example(name string) string {
	return filepath.Join(testenv.RepoRoot(), "examples", name)
}

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = rendercli.Run(args, &o, &e)
	return o.String(), e.String(), code
}

// tempFiles writes files into a temporary directory of the test and
// returns their paths.
func tempFiles(t *testing.T) func(name, body string) string {
	dir := t.TempDir()
	return func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// The README's examples, rendered as documented, pass the real consumers.
func TestREADMEExamples(t *testing.T) {
	cluster := example("render/cluster.yaml")
	out, errOut, code := run(t, "-f", example("kubeadmconfig-cloud-config.yaml"), "--cluster", cluster, "--validate")
	if code != 0 {
		t.Fatalf("cloud-config: %s", errOut)
	}
	if err := consumers.CloudInit([]byte(out)); err != nil {
		t.Error(err)
	}

	out, errOut, code = run(t, "-f", example("kubeadmconfig-ignition.yaml"), "--cluster", cluster, "--validate", "--feature-gates", "KubeadmBootstrapFormatIgnition=true")
	if code != 0 {
		t.Fatalf("ignition: %s", errOut)
	}
	if err := consumers.Ignition([]byte(out)); err != nil {
		t.Error(err)
	}

	dir := t.TempDir()
	_, errOut, code = run(t, "-f", example("kubeadmconfig-raw.yaml"), "--cluster", cluster, "--validate", "--feature-gates", "KubeadmBootstrapFormatRaw=true", "--output-dir", dir)
	if code != 0 {
		t.Fatalf("raw: %s", errOut)
	}
	value, err := os.ReadFile(filepath.Join(dir, "value"))
	if err != nil {
		t.Fatal(err)
	}
	if err := consumers.Kubeadm(value); err != nil {
		t.Error(err)
	}
	files, err := os.ReadFile(filepath.Join(dir, raw.FilesKey))
	if err != nil {
		t.Fatal(err)
	}
	var doc raw.FilesDocument
	if err := yaml.UnmarshalStrict(files, &doc); err != nil || len(doc.Files) != 8 {
		t.Errorf("files document: %v, %d files", err, len(doc.Files))
	}
	if format, _ := os.ReadFile(filepath.Join(dir, "format")); string(format) != "raw" {
		t.Errorf("format key %q", format)
	}
}

func TestValidateReportsEveryFieldWithItsPath(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: t}
spec:
  template:
    spec:
      format: raw
      joinConfiguration: {nodeRegistration: {name: node-a}}
      files: [{path: /a, content: x}]
      preKubeadmCommands: [x]
      verbosity: 3
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "-f", cfg, "--kubernetes-version", "v1.36.3", "--validate", "--feature-gates", "KubeadmBootstrapFormatRaw=true")
	if code == 0 {
		t.Fatal("invalid template rendered")
	}
	for _, p := range []string{"spec.template.spec.files[0].path", "spec.template.spec.preKubeadmCommands", "spec.template.spec.verbosity"} {
		if !strings.Contains(errOut, p+": Forbidden") {
			t.Errorf("missing %s in:\n%s", p, errOut)
		}
	}
}

func TestClearErrors(t *testing.T) {
	write := tempFiles(t)
	typo := write("typo.yaml", "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nspec:\n  prekubeadmCommands: [x]\n")
	missingSecret := write("secret.yaml", "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nspec:\n  joinConfiguration: {}\n  files:\n  - path: /x\n    contentFrom: {secret: {name: s, key: k}}\n")
	twoDocs := write("two.yaml", "# two configs\napiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nspec:\n  joinConfiguration: {}\n---\napiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nspec:\n  joinConfiguration: {}\n")
	initOnly := write("init.yaml", "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nspec:\n  initConfiguration: {nodeRegistration: {name: node1}}\n")
	cpJoin := write("cpjoin.yaml", "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nspec:\n  joinConfiguration: {controlPlane: {}}\n")
	version := []string{"--kubernetes-version", "v1.36.3", "--control-plane-endpoint", "1.2.3.4:6443"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown field":  {[]string{"-f", typo, "--kubernetes-version", "v1.36.3"}, `unknown field "spec.prekubeadmCommands"`},
		"no version":     {[]string{"-f", missingSecret}, "Kubernetes version is required"},
		"secret":         {[]string{"-f", missingSecret, "--kubernetes-version", "v1.36.3", "--control-plane-endpoint", "1.2.3.4:6443"}, "spec.files[0].contentFrom.secret"},
		"bad action":     {[]string{"-f", missingSecret, "--kubernetes-version", "v1.36.3", "--action", "reset"}, "--action"},
		"missing config": {nil, "--config is required"},
		"unknown key":    {[]string{"-f", example("kubeadmconfig-cloud-config.yaml"), "--cluster", example("render/cluster.yaml"), "--key", "files"}, `no key "files"`},
		"two documents":  {append([]string{"-f", twoDocs}, version...), "holds 2 YAML documents"},
		// A gated format is refused as at admission, with or without --validate.
		"gate off":             {[]string{"-f", example("kubeadmconfig-raw.yaml"), "--cluster", example("render/cluster.yaml")}, "KubeadmBootstrapFormatRaw"},
		"init on a join spec":  {append([]string{"-f", cpJoin, "--action", "init"}, version...), "--action init, but"},
		"join on an init spec": {append([]string{"-f", initOnly, "--action", "join"}, version...), "has no spec.joinConfiguration"},
		"join on a cp join":    {append([]string{"-f", cpJoin, "--action", "join"}, version...), "spec.joinConfiguration.controlPlane"},
	} {
		t.Run(name, func(t *testing.T) {
			_, errOut, code := run(t, tc.args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("want failure mentioning %q, got code %d:\n%s", tc.want, code, errOut)
			}
		})
	}

	// contentFrom resolves from --secrets-dir.
	dir := filepath.Dir(missingSecret)
	if err := os.MkdirAll(filepath.Join(dir, "secrets", "s"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets", "s", "k"), []byte("resolved"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "-f", missingSecret, "--kubernetes-version", "v1.36.3", "--control-plane-endpoint", "1.2.3.4:6443", "--secrets-dir", filepath.Join(dir, "secrets"))
	if code != 0 || !strings.Contains(out, "resolved") {
		t.Fatalf("contentFrom not resolved: %s", errOut)
	}
}

// Given certificates are used rather than generated.
func TestCertificatesDir(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := run(t, "-f", example("kubeadmconfig-raw.yaml"), "--cluster", example("render/cluster.yaml"), "--feature-gates", "KubeadmBootstrapFormatRaw=true", "--output-dir", dir)
	if code != 0 {
		t.Fatal(errOut)
	}
	var doc raw.FilesDocument
	b, _ := os.ReadFile(filepath.Join(dir, raw.FilesKey))
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	pki := filepath.Join(dir, "pki")
	for _, f := range doc.Files {
		p := filepath.Join(pki, strings.TrimPrefix(f.Path, "/etc/kubernetes/pki"))
		_ = os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(f.Content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := run(t, "-f", example("kubeadmconfig-cloud-config.yaml"), "--cluster", example("render/cluster.yaml"), "--certificates-dir", pki)
	if code != 0 {
		t.Fatal(errOut)
	}
	if strings.Contains(errOut, "generated") {
		t.Error("certificates were generated although --certificates-dir was given")
	}
	// The worker's discovery pins the given CA.
	if !strings.Contains(out, "caCertHashes") {
		t.Error("no CA pin in the join configuration")
	}
}

// --size-report measures the data instead of printing it: the size of what
// would be written, each limit's verdict, and the size with gzipUserData.
func TestSizeReport(t *testing.T) {
	cluster := example("render/cluster.yaml")
	data, _, code := run(t, "-f", example("kubeadmconfig-cloud-config.yaml"), "--cluster", cluster)
	if code != 0 {
		t.Fatal("render failed")
	}
	out, errOut, code := run(t, "-f", example("kubeadmconfig-cloud-config.yaml"), "--cluster", cluster, "--size-report", "--token", "abcdef.0123456789abcdef")
	if code != 0 {
		t.Fatalf("%s", errOut)
	}
	// Throwaway certificates differ between runs by a few bytes at most.
	var size int
	if _, err := fmt.Sscanf(out, "format cloud-config: %d bytes", &size); err != nil || size < len(data)-16 || size > len(data)+16 {
		t.Errorf("reported %d bytes (%v), the data has %d:\n%s", size, err, len(data), out)
	}
	for _, want := range []string{"with gzipUserData:", "AWS EC2 user data", "fits ("} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "#cloud-config") {
		t.Errorf("the report prints the data:\n%s", out)
	}
}

// render reads the format annotation as the manager does: a KubeadmConfig
// as KubeadmControlPlane writes it, annotated raw, renders raw; with raw's
// gate off it is refused at the annotation.
func TestRenderHonoursTheFormatAnnotation(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata:
  name: cp
  annotations: {bootstrap.cluster.x-k8s.io/format: raw}
spec:
  format: cloud-config
  joinConfiguration: {nodeRegistration: {name: node-a}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "-f", cfg, "--kubernetes-version", "v1.36.3", "--control-plane-endpoint", "10.0.0.1:6443", "--validate",
		"--feature-gates", "KubeadmBootstrapFormatRaw=true")
	if code != 0 || !strings.HasPrefix(out, "---\napiVersion: kubeadm.k8s.io/") || strings.Contains(out, "#cloud-config") {
		t.Fatalf("rendered (%d):\n%s\n%s", code, out, errOut)
	}
	_, errOut, code = run(t, "-f", cfg, "--kubernetes-version", "v1.36.3", "--control-plane-endpoint", "10.0.0.1:6443", "--validate")
	if code == 0 || !strings.Contains(errOut, "KubeadmBootstrapFormatRaw") || !strings.Contains(errOut, "metadata.annotations[bootstrap.cluster.x-k8s.io/format]") {
		t.Fatalf("raw by annotation with its gate off: %d\n%s", code, errOut)
	}
}

// TestValidatePrintsAdmissionWarnings: what admission would warn about (a
// decimal mode in Butane, which reaches the machine as another mode) is
// printed by --validate too, and the data still renders.
func TestValidatePrintsAdmissionWarnings(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata: {name: w}
spec:
  format: ignition
  joinConfiguration: {nodeRegistration: {name: node-a}}
  ignition:
    butane:
      additionalConfig: |
        storage:
          files:
          - path: /etc/x
            mode: 644
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "-f", cfg, "--kubernetes-version", "v1.36.3", "--control-plane-endpoint", "1.2.3.4:6443", "--validate", "--feature-gates", "KubeadmBootstrapFormatIgnition=true")
	if code != 0 || out == "" {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "Warning: spec.ignition.butane.additionalConfig:") || !strings.Contains(errOut, "octal") || !strings.Contains(errOut, "line 4") {
		t.Errorf("--validate does not print admission's warning on the decimal mode (at the user's line 4):\n%s", errOut)
	}
}

// TestTheControllersBounds: render refuses what the controller refuses, as
// quickly: extra Ignition configuration and manifests whose aliases expand
// past their bound (naming field and bound, or the gate when it is off),
// and data no Secret can hold (BootstrapDataTooLarge).
func TestTheControllersBounds(t *testing.T) {
	write := tempFiles(t)
	indent := func(s string) string {
		return "        " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n        ") + "\n"
	}
	const header = "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nspec:\n  format: ignition\n  joinConfiguration: {}\n"
	butane := write("butane.yaml", header+"  ignition:\n    butane:\n      additionalConfig: |\n"+indent(hostile.AliasBomb(14<<10, 100, 1900)))
	manifest := write("manifest.yaml", hostile.AliasBomb(14<<10, 100, 1900)+header+"  files:\n  - path: /a\n    content: *l2\n")
	var large strings.Builder
	large.WriteString(header + "  files:\n")
	for i := range 95 {
		fmt.Fprintf(&large, "  - path: /etc/large/%d\n    content: %s\n", i, strings.Repeat("y", 10000))
	}
	tooLarge := write("large.yaml", large.String())
	gate := []string{"--feature-gates", "KubeadmBootstrapFormatIgnition=true"}
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"Butane aliases":   {append([]string{"-f", butane}, gate...), []string{"spec.ignition.butane.additionalConfig", strconv.Itoa(yamlsize.ExtraIgnitionConfig)}},
		"gate off":         {[]string{"-f", butane}, []string{"spec.format", "KubeadmBootstrapFormatIgnition"}},
		"manifest aliases": {append([]string{"-f", manifest}, gate...), []string{manifest, strconv.Itoa(yamlsize.RenderInput)}},
		"data too large":   {append([]string{"-f", tooLarge}, gate...), []string{"more than the 1048576 bytes a Secret can hold"}},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			var errOut string
			var code int
			alloc := hostile.Allocated(func() {
				_, errOut, code = run(t, append(tc.args, "--cluster", example("render/cluster.yaml"))...)
			})
			for _, want := range tc.want {
				if code == 0 || !strings.Contains(errOut, want) {
					t.Fatalf("want a failure naming %q, got code %d:\n%.400s", want, code, errOut)
				}
			}
			if d := time.Since(start); d > 10*time.Second || alloc > 256<<20 {
				t.Errorf("refusing it took %s and %d MiB", d, alloc>>20)
			}
		})
	}
}
