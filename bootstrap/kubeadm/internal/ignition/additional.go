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

package ignition

import (
	"errors"
	"fmt"
	"strings"

	ignconfig "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"k8s.io/utils/ptr"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignition/butane"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignition/clc"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignition/guard"
)

// mergeAdditional merges spec.ignition's extra configuration (Butane, or a
// Container Linux Config) into the
// generated config. The extra config is the child: where both set the same
// file or unit, the user's wins (Ignition's merge rules).
func mergeAdditional(cfg types.Config, p *plan.Plan) (*types.Config, error) {
	var child types.Config
	var err error
	switch b, c := p.Ignition.Butane, p.Ignition.ContainerLinuxConfig; {
	case b.AdditionalConfig != "" && c.AdditionalConfig != "":
		return nil, fmt.Errorf("spec.ignition: containerLinuxConfig and butane are mutually exclusive")
	case b.AdditionalConfig != "":
		if child, _, err = butane.Translate(b.AdditionalConfig, ptr.Deref(b.Strict, false)); err != nil {
			return nil, fmt.Errorf("spec.ignition.butane.additionalConfig: %w", err)
		}
	case c.AdditionalConfig != "":
		// Upstream's Ignition 2 output took Container Linux Configs; they are
		// translated to Ignition 3 so existing specs keep working.
		if child, _, err = clc.Translate(c.AdditionalConfig, ptr.Deref(c.Strict, false)); err != nil {
			return nil, fmt.Errorf("spec.ignition.containerLinuxConfig.additionalConfig: %w", err)
		}
	default:
		return &cfg, nil
	}
	// Admission refuses these; a config admitted before that rule existed
	// fails here rather than silently losing its bootstrap.
	if conflicts := guard.Conflicts(child, "spec.ignition"); len(conflicts) > 0 {
		return nil, errors.New(strings.Join(conflicts, "; "))
	}
	merged := ignconfig.Merge(cfg, child)
	return &merged, nil
}
