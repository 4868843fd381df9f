package ignition

import (
	"fmt"

	butanecommon "github.com/coreos/butane/config/common"
	flatcarbutane "github.com/coreos/butane/config/flatcar/v1_1"
	ignconfig "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/coreos/vcontext/report"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
)

const (
	// ButaneVariant and ButaneVersion are the Butane dialect additionalConfig
	// is read as; it translates to Ignition SpecVersion.
	ButaneVariant = "flatcar"
	ButaneVersion = "1.1.0"
)

// mergeAdditional merges spec.ignition's extra configuration into the
// generated config. The extra config is the child: where both set the same
// file or unit, the user's wins (Ignition's merge rules).
func mergeAdditional(cfg types.Config, p *plan.Plan) (*types.Config, error) {
	b := p.Ignition.Butane
	if b.AdditionalConfig == "" {
		return &cfg, nil
	}
	child, err := TranslateButane(b.AdditionalConfig, ptr.Deref(b.Strict, false))
	if err != nil {
		return nil, fmt.Errorf("spec.ignition.butane.additionalConfig: %w", err)
	}
	merged := ignconfig.Merge(cfg, child)
	return &merged, nil
}

// TranslateButane translates a Butane document (variant flatcar) to an
// Ignition config. variant and version may be omitted; other variants or
// versions are refused because their output would not merge into ours. With
// strict, any warning is an error. Errors are Butane's own messages.
func TranslateButane(doc string, strict bool) (types.Config, error) {
	var header struct {
		Variant string `json:"variant"`
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal([]byte(doc), &header); err != nil {
		return types.Config{}, fmt.Errorf("not valid YAML: %w", err)
	}
	switch {
	case header.Variant == "" && header.Version == "":
		doc = "variant: " + ButaneVariant + "\nversion: " + ButaneVersion + "\n" + doc
	case header.Variant != ButaneVariant || header.Version != ButaneVersion:
		return types.Config{}, fmt.Errorf("variant %q version %q is not supported: use variant %q version %q (or omit both)",
			header.Variant, header.Version, ButaneVariant, ButaneVersion)
	}
	out, r, err := flatcarbutane.ToIgn3_4Bytes([]byte(doc), butanecommon.TranslateBytesOptions{})
	if err != nil {
		if len(r.Entries) > 0 {
			return types.Config{}, fmt.Errorf("%v: %s", err, trimReport(r))
		}
		return types.Config{}, err
	}
	if strict && len(r.Entries) > 0 {
		return types.Config{}, fmt.Errorf("strict mode: %s", trimReport(r))
	}
	cfg, pr, err := ignconfig.Parse(out)
	if err != nil {
		return types.Config{}, fmt.Errorf("translated config is invalid: %v: %s", err, trimReport(pr))
	}
	return cfg, nil
}

func trimReport(r report.Report) string {
	s := r.String()
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}
