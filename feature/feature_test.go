package feature

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestGateDefaultsAndFlags(t *testing.T) {
	defaults := NewFeatureGates()
	for f := range defaultGates {
		if want := f != KubeadmBootstrapFormatIgnition && f != KubeadmBootstrapFormatRaw; defaults.Enabled(f) != want {
			t.Errorf("%s enabled by default: %v, want %v", f, defaults.Enabled(f), want)
		}
		if EnvVar(f) == "" {
			t.Errorf("%s has no clusterctl variable", f)
		}
	}

	gates := NewFeatureGates()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	gates.AddFlag(fs)
	if err := fs.Parse([]string{"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true"}); err != nil {
		t.Fatal(err)
	}
	if !gates.Enabled(KubeadmBootstrapFormatIgnition) || !gates.Enabled(KubeadmBootstrapFormatRaw) {
		t.Fatal("gates were not enabled by --feature-gates")
	}
	if err := fs.Parse([]string{"--feature-gates=NoSuchGate=true"}); err == nil {
		t.Fatal("unknown gate accepted")
	}
}
