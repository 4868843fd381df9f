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
	"fmt"
	"strings"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/placeholders"
)

// Flatcar has no cloud-init: the machine's metadata comes from Afterburn
// (coreos-metadata.service), which writes it as environment variables to
// MetadataEnvFile. kubeadm.service loads that file when the kubeadm
// configuration has placeholders, and the script fills them before kubeadm runs.
const (
	MetadataEnvFile = bootstrapv1.IgnitionMetadataEnvFile
	metadataUnit    = "coreos-metadata.service"
	// legacyMetadataEnvFile is where older templates' own units write COREOS_CUSTOM_*.
	legacyMetadataEnvFile = "/run/metadata/coreos"
)

// checkVerbatim refuses instance-data placeholders where Ignition would write
// them verbatim (files, commands): cloud-init would have filled them.
// Admission refuses them too; this catches specs admitted before that and
// contents that come from secrets.
func checkVerbatim(p *plan.Plan) error {
	for _, f := range p.Files {
		if f.Kind == plan.FileUser && hasInstanceData(f.Content) {
			return fmt.Errorf("%s: the content uses cloud-init's instance data ({{ ds.* }}, {{ v1.* }}), which Ignition writes verbatim", f.Source)
		}
	}
	for _, cmds := range []struct {
		field string
		list  []string
	}{{"preKubeadmCommands", p.PreKubeadmCommands}, {"postKubeadmCommands", p.PostKubeadmCommands}} {
		for i, c := range cmds.list {
			if hasInstanceData(c) {
				return fmt.Errorf("spec.%s[%d]: the command uses cloud-init's instance data ({{ ds.* }}, {{ v1.* }}), which Ignition runs verbatim; read %s instead", cmds.field, i, MetadataEnvFile)
			}
		}
	}
	return nil
}

func hasInstanceData(s string) bool {
	for _, ph := range placeholders.Find(s) {
		if ph.InstanceData {
			return true
		}
	}
	return false
}

// fillPlaceholders is the script part that replaces each placeholder in the
// configuration at configPath with the first Afterburn attribute that is set
// (for the hostname, the machine's hostname when the platform has none). A
// value that could break the YAML around it stops the bootstrap.
func fillPlaceholders(configPath string, found []placeholders.Placeholder) string {
	var b strings.Builder
	b.WriteString("# Fill the kubeadm configuration's {{ ds.meta_data.* }} placeholders from Afterburn's metadata.\n")
	b.WriteString("metadata() {\n  local v\n  for v in \"$@\"; do\n    if [ -n \"${!v:-}\" ]; then printf '%s' \"${!v}\"; return 0; fi\n  done\n  return 1\n}\n")
	b.WriteString("config=$(< " + shellQuote(configPath) + ")\n")
	for _, ph := range found {
		attrs := placeholders.AfterburnAttributes[ph.Metadata]
		fmt.Fprintf(&b, "value=$(metadata %s", strings.Join(attrs, " "))
		if ph.Metadata == rawv1.MetadataLocalHostname {
			b.WriteString(" || hostname")
		}
		fmt.Fprintf(&b, ") || { echo \"kubeadm.sh: %s has no attribute for %s\" >&2; exit 1; }\n", MetadataEnvFile, ph.Metadata)
		// The pattern is unquoted: bash reads a quoted right-hand side of =~ as a literal string.
		fmt.Fprintf(&b, "[[ $value =~ %s ]] || { echo \"kubeadm.sh: the %s from %s has unexpected characters\" >&2; exit 1; }\n",
			rawv1.MetadataValuePattern, ph.Metadata, MetadataEnvFile)
		fmt.Fprintf(&b, "config=${config//%s/\"$value\"}\n", shellQuote(ph.Text))
	}
	b.WriteString("printf '%s\\n' \"$config\" > " + shellQuote(configPath) + "\n")
	return b.String()
}

// shellQuote quotes s for bash as one literal word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
