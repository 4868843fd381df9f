package ignition

import (
	"fmt"

	ignconfig "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"k8s.io/utils/ptr"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/butane"
)

// mergeAdditional merges spec.ignition's extra configuration into the
// generated config. The extra config is the child: where both set the same
// file or unit, the user's wins (Ignition's merge rules).
func mergeAdditional(cfg types.Config, p *plan.Plan) (*types.Config, error) {
	b := p.Ignition.Butane
	if b.AdditionalConfig == "" {
		return &cfg, nil
	}
	child, err := butane.Translate(b.AdditionalConfig, ptr.Deref(b.Strict, false))
	if err != nil {
		return nil, fmt.Errorf("spec.ignition.butane.additionalConfig: %w", err)
	}
	merged := ignconfig.Merge(cfg, child)
	return &merged, nil
}
