package manager

import (
	"strings"
	"testing"
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
