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

package feature

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestGateDefaultsAndFlags(t *testing.T) {
	defaults := NewFeatureGates()
	for f := range defaultGates {
		if want := f != KubeadmBootstrapFormatIgnition && f != KubeadmBootstrapFormatRaw && f != KubeadmInPlaceUpdates; defaults.Enabled(f) != want {
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
