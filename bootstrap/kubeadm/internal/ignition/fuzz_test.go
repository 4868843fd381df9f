package ignition_test

import (
	"testing"

	ignconfig "github.com/coreos/ignition/v2/config/v3_4"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/ignition"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
)

// FuzzRender: arbitrary specs never panic, and every success is a config
// Ignition's own parser accepts without errors.
func FuzzRender(f *testing.F) {
	plantest.AddFuzzSeeds(f, bootstrapv1.Ignition)
	f.Fuzz(func(t *testing.T, data []byte, action uint8) {
		p, ok := plantest.FuzzPlan(data, action, bootstrapv1.Ignition)
		if !ok {
			return
		}
		out, err := ignition.Render(p)
		if err != nil {
			return
		}
		cfg, report, err := ignconfig.Parse(out)
		if err != nil || report.IsFatal() {
			t.Fatalf("output does not parse: %v %s", err, report.String())
		}
		if cfg.Ignition.Version != ignition.SpecVersion {
			t.Fatalf("version %s", cfg.Ignition.Version)
		}
	})
}
