package kubeadmconfig

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// TestResyncRevisitsConfigs: the informer's periodic resync (--sync-period)
// delivers each KubeadmConfig again unchanged; it must reach the reconciler,
// while this controller's own status writes (a new resource version, same
// generation) do not.
func TestResyncRevisitsConfigs(t *testing.T) {
	cfg := &bootstrapv1.KubeadmConfig{}
	cfg.ResourceVersion, cfg.Generation = "10", 2
	if !configChanged.Update(event.UpdateEvent{ObjectOld: cfg, ObjectNew: cfg.DeepCopy()}) {
		t.Error("a resync was filtered out")
	}
	statusWrite := cfg.DeepCopy()
	statusWrite.ResourceVersion = "11"
	if configChanged.Update(event.UpdateEvent{ObjectOld: cfg, ObjectNew: statusWrite}) {
		t.Error("a status-only write woke the config")
	}
}
