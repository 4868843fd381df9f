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

package manager

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/moduledir"
)

// TestUpstreamDeploymentFlags: the flags upstream's Deployment passes (and a
// kustomize patch over it may add) start this manager too.
func TestUpstreamDeploymentFlags(t *testing.T) {
	opts, err := ParseFlags([]string{"--leader-elect", "--contention-profiling",
		"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields", "--diagnostics-address=:8443"})
	if err != nil {
		t.Fatal(err)
	}
	if !opts.contentionProfiling || len(opts.skipCRDMigration) != 2 {
		t.Errorf("parsed %+v", opts)
	}
	_, err = ParseFlags([]string{"--skip-crd-migration-phases=Everything"})
	if err == nil || !strings.Contains(err.Error(), "Everything") {
		t.Errorf("an unknown phase: %v", err)
	}
}

// TestLeaderElectionLeaseIsUpstreams: the Deployment keeps upstream's name
// and namespace, so components applied over upstream's (or upstream's over
// these) run both managers until the rollout ends; they must compete for one
// lease, upstream's, read from upstream's manager source of the pinned
// version.
func TestLeaderElectionLeaseIsUpstreams(t *testing.T) {
	dir := moduledir.Of(t, "sigs.k8s.io/cluster-api", "")
	src, err := os.ReadFile(filepath.Join(dir, "bootstrap", "kubeadm", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`LeaderElectionID:\s*"` + regexp.QuoteMeta(leaderElectionID) + `"`).Match(src) {
		t.Fatalf("upstream's bootstrap manager does not use the lease %q", leaderElectionID)
	}
}

// TestKubernetesBinariesSource: nodes fetch binaries from an absolute http
// or https URL; none or nothing names no source; anything else is refused without echoing it (it may hold
// credentials).
func TestKubernetesBinariesSource(t *testing.T) {
	opts, err := ParseFlags([]string{"--node-update-kubernetes-binaries=https://dl.k8s.io/release"})
	if err != nil || opts.binariesSource() != "https://dl.k8s.io/release" {
		t.Fatalf("a dl.k8s.io source: %v (%q)", err, opts.kubernetesBinaries)
	}
	for _, off := range [][]string{nil, {"--node-update-kubernetes-binaries=none"}, {"--node-update-kubernetes-binaries="}} {
		if opts, err := ParseFlags(off); err != nil || opts.binariesSource() != "" {
			t.Errorf("%v: %v (%q)", off, err, opts.binariesSource())
		}
	}
	for _, bad := range []string{"dl.k8s.io/release", "file:///srv/k8s", "ftp://u:s3cret@host/k8s"} {
		_, err := ParseFlags([]string{"--node-update-kubernetes-binaries=" + bad})
		if err == nil || strings.Contains(err.Error(), bad) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
