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

package fieldrules

import (
	"fmt"
	"path"
	"reflect"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	upstreamadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignition/butane"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignition/clc"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignition/guard"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/placeholders"
)

// formatGates maps the gated formats to their feature gate.
var formatGates = map[bootstrapv1.Format]featuregate.Feature{
	bootstrapv1.Ignition: feature.KubeadmBootstrapFormatIgnition,
	bootstrapv1.Raw:      feature.KubeadmBootstrapFormatRaw,
}

// FormatDisabled says why format cannot be used with gates, naming the gate,
// the manager flag and the clusterctl variable; empty when it can be used.
func FormatDisabled(format bootstrapv1.Format, gates featuregate.FeatureGate) string {
	gate, gated := formatGates[format]
	if !gated || gates.Enabled(gate) {
		return ""
	}
	return fmt.Sprintf("format %q can be set only if the %s feature gate is enabled (manager flag --feature-gates=%s=true, clusterctl variable %s=true)",
		format, gate, gate, feature.EnvVar(gate))
}

// Validate checks a KubeadmConfig spec found at base (spec, or
// spec.template.spec for templates) and returns every problem at once.
func Validate(spec *bootstrapv1.KubeadmConfigSpec, gates featuregate.FeatureGate, base *field.Path) field.ErrorList {
	errs, _ := ValidateWithWarnings(spec, gates, base)
	return errs
}

// ValidateWithWarnings is Validate, plus what admission reports without
// refusing: the translators' warnings on a non-strict Butane or Container
// Linux Config (a decimal file mode, say, which means something else than it
// seems to). Strict configs already fail on any warning.
func ValidateWithWarnings(spec *bootstrapv1.KubeadmConfigSpec, gates featuregate.FeatureGate, base *field.Path) (field.ErrorList, []string) {
	return validate(spec, source{format: spec.EffectiveFormat()}, gates, base)
}

// validate is ValidateWithWarnings for a spec whose format src chose.
func validate(spec *bootstrapv1.KubeadmConfigSpec, src source, gates featuregate.FeatureGate, base *field.Path) (field.ErrorList, []string) {
	errs := validateCommon(spec, base)
	errs = append(errs, validateDiscoveryFilePath(spec, base)...)

	// A format whose gate is off is refused, and the rest is checked as that
	// format renders it all the same: an update that ratchets the refusal
	// (stored before the gate went off) is still checked for what it changes.
	// Only the translation of extra Ignition configuration is left out: no
	// one who may not use the format gets to make the webhook translate
	// documents; the controller translates them if the gate comes back.
	format := spec.EffectiveFormat()
	disabled := FormatDisabled(format, gates)
	if disabled != "" {
		errs = append(errs, field.Forbidden(base.Child("format"), disabled))
	}

	errs = append(errs, checkFormatFields(spec, src, base)...)
	errs = append(errs, validatePlaceholders(spec, format, base)...)
	// What the machine would fail on, decided where the renderers decide it;
	// content whose encoding the format refuses is not decoded as well.
	for _, e := range machinechecks.Files(spec.Files, base.Child("files")) {
		if !reported(errs, strings.TrimSuffix(e.Field, ".content")+".encoding") {
			errs = append(errs, e)
		}
	}
	var warnings []string
	if format == bootstrapv1.CloudConfig {
		errs = append(errs, machinechecks.CloudInitDisks(spec.DiskSetup, base)...)
	}
	if format == bootstrapv1.Ignition {
		errs = append(errs, machinechecks.IgnitionStorage(spec.DiskSetup, spec.Mounts, base)...)
	}
	if format == bootstrapv1.Ignition && disabled == "" {
		ignErrs, ignWarnings := validateIgnitionSpec(spec, base)
		errs, warnings = append(errs, ignErrs...), ignWarnings
	}
	return errs, warnings
}

// reported tells whether errs has an error at path.
func reported(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if e.Field == path {
			return true
		}
	}
	return false
}

// validateCommon applies the checks upstream Cluster API makes for every
// format (file and user sources, unique file paths, disk layout sums,
// discovery kubeconfig users), by running upstream's own validation on the
// format-independent part of the spec.
func validateCommon(spec *bootstrapv1.KubeadmConfigSpec, base *field.Path) field.ErrorList {
	common := upstreambootstrapv1.KubeadmConfigSpec{
		ClusterConfiguration: spec.ClusterConfiguration,
		InitConfiguration:    spec.InitConfiguration,
		JoinConfiguration:    spec.JoinConfiguration,
		Files:                spec.Files,
		DiskSetup:            spec.DiskSetup,
		Mounts:               spec.Mounts,
		BootCommands:         spec.BootCommands,
		PreKubeadmCommands:   spec.PreKubeadmCommands,
		PostKubeadmCommands:  spec.PostKubeadmCommands,
		Users:                spec.Users,
		NTP:                  spec.NTP,
		Verbosity:            spec.Verbosity,
		// Format and Ignition stay empty: this package owns the format rules.
	}
	return redact(upstreamadmission.Validate(&common, false, base))
}

// validateDiscoveryFilePath refuses a user file at the path where the
// discovery kubeconfig (discovery.file.kubeConfig) is written: two writers of
// one path would leave the machine with whichever ran last, silently.
func validateDiscoveryFilePath(spec *bootstrapv1.KubeadmConfigSpec, base *field.Path) field.ErrorList {
	d := &spec.JoinConfiguration.Discovery.File
	if !d.KubeConfig.IsDefined() || d.KubeConfigPath == "" {
		return nil
	}
	var errs field.ErrorList
	for i, f := range spec.Files {
		if path.Clean(f.Path) == path.Clean(d.KubeConfigPath) {
			errs = append(errs, field.Invalid(base.Child("files").Index(i).Child("path"), f.Path,
				"the discovery kubeconfig (spec.joinConfiguration.discovery.file.kubeConfig) is written to this path "+
					"(spec.joinConfiguration.discovery.file.kubeConfigPath); use another path for one of them"))
		}
	}
	return errs
}

// validatePlaceholders refuses the Jinja a format without cloud-init cannot
// honour: kubeadm (or Ignition, for files and commands) would take the text
// verbatim, and the machine would get a node named "{{ ds.meta_data.x }}".
func validatePlaceholders(spec *bootstrapv1.KubeadmConfigSpec, format bootstrapv1.Format, base *field.Path) field.ErrorList {
	fills := map[bootstrapv1.Format]string{
		bootstrapv1.Ignition: "from Afterburn's metadata",
		bootstrapv1.Raw:      "by declaring them for the agent",
	}[format]
	if fills == "" {
		return nil // cloud-init renders the cloud-config output as a Jinja template
	}
	// specPart is a top-level spec field, walked for its strings.
	type specPart struct {
		name string
		v    any
	}
	var errs field.ErrorList
	for _, k := range []specPart{{"clusterConfiguration", &spec.ClusterConfiguration}, {"initConfiguration", &spec.InitConfiguration}, {"joinConfiguration", &spec.JoinConfiguration}} {
		for _, f := range placeholders.InStrings(k.v, base.Child(k.name)) {
			if !f.Supported() {
				errs = append(errs, field.Invalid(f.Path, shownPlaceholder(f.Text), fmt.Sprintf(
					"the %s format fills only %s in kubeadm configuration (%s); kubeadm would read any other Jinja verbatim",
					format, placeholders.SupportedSummary(), fills)))
			}
		}
	}
	if format == bootstrapv1.Raw {
		// Its only other field: the kubeadm patches the agent writes as given.
		for _, f := range placeholders.InStrings(spec.Files, base.Child("files")) {
			if f.InstanceData {
				errs = append(errs, field.Invalid(f.Path, shownPlaceholder(f.Text),
					"the agent writes kubeadm patches verbatim: the raw format fills cloud-init's instance data only in kubeadm configuration"))
			}
		}
		return errs
	}
	for _, x := range []specPart{{"files", spec.Files}, {"preKubeadmCommands", spec.PreKubeadmCommands}, {"postKubeadmCommands", spec.PostKubeadmCommands},
		{"users", spec.Users}, {"mounts", spec.Mounts}, {"diskSetup", &spec.DiskSetup}, {"ntp", &spec.NTP}} {
		for _, f := range placeholders.InStrings(x.v, base.Child(x.name)) {
			if f.InstanceData {
				errs = append(errs, field.Invalid(f.Path, shownPlaceholder(f.Text), fmt.Sprintf(
					"Ignition writes this verbatim: the ignition format fills cloud-init's instance data only in kubeadm configuration; "+
						"commands can read Afterburn's metadata from %s", bootstrapv1.IgnitionMetadataEnvFile)))
			}
		}
	}
	return errs
}

// shownPlaceholder is the bad value shown for a placeholder: the short
// expression itself, never the text around it.
func shownPlaceholder(text string) any {
	if len(text) > 80 || strings.ContainsAny(text, "\n") {
		return field.OmitValueType{}
	}
	return text
}

// redact drops structured bad values (a whole file, user or kubeconfig user)
// from upstream's errors: they may hold file contents, password hashes or
// credentials, which must never reach an error message.
func redact(errs field.ErrorList) field.ErrorList {
	for _, e := range errs {
		if e.BadValue == nil {
			continue
		}
		switch reflect.ValueOf(e.BadValue).Kind() {
		case reflect.Struct, reflect.Pointer, reflect.Map, reflect.Slice:
			e.BadValue = field.OmitValueType{}
		}
	}
	return errs
}

// extraConfig is one kind of extra Ignition configuration and its translator.
type extraConfig struct {
	field, placeholder string
	doc                string
	strict             *bool
	translate          func(doc string, strict bool) (types.Config, []string, error)
}

// validateIgnitionSpec checks spec.ignition of spec at base: the extra
// configuration translates, and neither replaces what the bootstrap needs nor
// a spec.files entry.
func validateIgnitionSpec(spec *bootstrapv1.KubeadmConfigSpec, base *field.Path) (field.ErrorList, []string) {
	specFiles := map[string]string{}
	for i, f := range spec.Files {
		specFiles[path.Clean(f.Path)] = base.Child("files").Index(i).String()
	}
	ign, at := &spec.Ignition, base.Child("ignition")
	if ign.ContainerLinuxConfig.IsDefined() && ign.Butane.IsDefined() {
		return field.ErrorList{field.Forbidden(at.Child("butane"), "containerLinuxConfig and butane are mutually exclusive: set one")}, nil
	}
	// Extra configuration that would fail at reconcile time fails admission
	// instead, with the translator's own message; one translation gives the
	// errors, the guard's conflicts and the warnings.
	var errs field.ErrorList
	var warnings []string
	for _, x := range []extraConfig{
		{"butane", "<butane document>", ign.Butane.AdditionalConfig, ign.Butane.Strict, butane.Translate},
		{"containerLinuxConfig", "<container linux config>", ign.ContainerLinuxConfig.AdditionalConfig, ign.ContainerLinuxConfig.Strict, clc.Translate},
	} {
		if x.doc == "" {
			continue
		}
		fp := at.Child(x.field, "additionalConfig")
		extra, ws, err := x.translate(x.doc, ptr.Deref(x.strict, false))
		if err != nil {
			return field.ErrorList{field.Invalid(fp, x.placeholder, err.Error())}, nil
		}
		for _, c := range guard.Conflicts(extra, fp.String()) {
			errs = append(errs, field.Forbidden(fp, c))
		}
		warnings = append(warnings, guard.SpecFileOverlaps(extra, specFiles, fp.String())...)
		for _, w := range ws {
			warnings = append(warnings, fp.String()+": "+w)
		}
	}
	return errs, warnings
}
