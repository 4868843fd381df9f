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

// Package testbin is the one place tests, end-to-end suites and benchmarks find
// the tool binaries that hack/tools.sh builds (kube-apiserver, etcd, kubeadm,
// the Ignition validator, cloud-init). Versions come from versions.env, which
// the script and the Makefile read too.
package testbin

import (
	"bufio"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed versions.env
var versionsEnv string

// Versions are the pinned tool versions from versions.env.
var Versions = parseVersions(versionsEnv)

func parseVersions(s string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// CacheDir is where hack/tools.sh puts the binaries: $CABPK_TOOLS_CACHE, or
// $XDG_CACHE_HOME/cabpk-formats/tools, or ~/.cache/cabpk-formats/tools.
func CacheDir() string {
	if d := os.Getenv("CABPK_TOOLS_CACHE"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "cabpk-formats", "tools")
}

// Tool names understood by Path.
const (
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Etcd                  = "etcd"
	Kubeadm               = "kubeadm"
	Kubectl               = "kubectl"
	Clusterctl            = "clusterctl"
	IgnitionValidate      = "ignition-validate"
	Ignition              = "ignition"
	CloudInit             = "cloud-init"
	Podman                = "podman"
	Benchstat             = "benchstat"
	// The e2e nodes' kubelet, and what their images are built from.
	Kubelet   = "kubelet"
	KubeProxy = "kube-proxy"
	CoreDNS   = "coredns"
	// Debian's packages that make an e2e host a node.
	Containerd = "containerd"
	Ctr        = "ctr"
	Runc       = "runc"
)

func toolPath(name string) (string, error) {
	v := Versions
	if p, ok := DefaultRelease().toolPath(name); ok {
		return p, nil
	}
	switch name {
	case Clusterctl:
		return filepath.Join(CacheDir(), name, v["CLUSTER_API_VERSION"], name), nil
	case IgnitionValidate, Ignition:
		return filepath.Join(CacheDir(), name, v["IGNITION_VERSION"], name), nil
	case Benchstat:
		return filepath.Join(CacheDir(), name, v["BENCHSTAT_VERSION"], name), nil
	case CloudInit, Podman, Containerd, Ctr, Runc:
		return exec.LookPath(name)
	}
	return "", fmt.Errorf("unknown tool %q", name)
}

// kubernetesToolPath is where hack/tools.sh puts a Kubernetes command of a
// version.
func kubernetesToolPath(name, version string) string {
	return filepath.Join(CacheDir(), name, version+"-"+Versions["KUBERNETES_TOOLS_BUILD"], name)
}

// MatrixVersions are the version matrix's Kubernetes versions, one patch of
// each supported minor (versions.env says which and why).
func MatrixVersions() []string {
	return strings.Split(Versions["KUBERNETES_MATRIX_VERSIONS"], ",")
}

// KubeadmOf returns the kubeadm of one of MatrixVersions, or an error that
// says how to build it.
func KubeadmOf(version string) (string, error) {
	p := kubernetesToolPath(Kubeadm, version)
	if executable(p) {
		return p, nil
	}
	return "", fmt.Errorf("kubeadm %s not found (looked for %q): run `hack/tools.sh kubeadm-matrix` (make test-versions does)", version, p)
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// systemPackage is true for the tools that come from Debian's packages
// (hack/tools.sh installs them), found on PATH.
func systemPackage(name string) bool {
	switch name {
	case CloudInit, Podman, Containerd, Ctr, Runc:
		return true
	}
	return false
}

// Path returns the path of an executable tool, or an error that says how to build it.
func Path(name string) (string, error) {
	p, err := toolPath(name)
	if err != nil && !systemPackage(name) {
		return "", err
	}
	if err == nil && executable(p) {
		return p, nil
	}
	return "", fmt.Errorf("%s not found (looked for %q): run `make tools` (hack/tools.sh) to build it", name, p)
}

// EnvtestAssets returns the directory holding kube-apiserver and etcd side by
// side, as controller-runtime's envtest expects (BinaryAssetsDirectory).
func EnvtestAssets() (string, error) {
	for _, tool := range []string{KubeAPIServer, Etcd} {
		if _, err := Path(tool); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(CacheDir(), "envtest", Versions["KUBERNETES_VERSION"]+"-"+Versions["KUBERNETES_TOOLS_BUILD"]+"-"+Versions["ETCD_VERSION"])
	if _, err := os.Stat(filepath.Join(dir, KubeAPIServer)); err != nil {
		return "", fmt.Errorf("envtest assets missing in %s: run `make tools`", dir)
	}
	return dir, nil
}

// TB is the part of testing.TB this package needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// MustPath is Path for tests: it fails the test when the tool is missing.
// Tests fail rather than skip so that a machine without the tools cannot
// report a green run that checked nothing.
func MustPath(t TB, name string) string {
	t.Helper()
	p, err := Path(name)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return p
}
