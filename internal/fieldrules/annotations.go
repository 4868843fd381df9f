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
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// maxButaneAnnotation is the size limit of spec.ignition.butane.additionalConfig.
const maxButaneAnnotation = 32768

// Resolve returns the spec a KubeadmConfig renders: its own, with the format
// and Butane its annotations choose (bootstrapv1.FormatAnnotation,
// bootstrapv1.IgnitionButaneAnnotation). Without those annotations it is
// spec itself. The annotation may choose the format only where the spec has
// the default, cloud-config (what KubeadmControlPlane writes); any other
// disagreement is refused at annotations, as are Butane outside the ignition
// format and Butane given both ways; what a refused annotation would choose
// stays as the spec has it.
func Resolve(annotations map[string]string, spec *bootstrapv1.KubeadmConfigSpec, annotationsPath *field.Path) (*bootstrapv1.KubeadmConfigSpec, field.ErrorList) {
	format, hasFormat := annotations[bootstrapv1.FormatAnnotation]
	butane, hasButane := annotations[bootstrapv1.IgnitionButaneAnnotation]
	if !hasFormat && !hasButane {
		return spec, nil
	}
	var errs field.ErrorList
	out := spec.DeepCopy()
	if hasFormat {
		at := annotationsPath.Key(bootstrapv1.FormatAnnotation)
		switch f := bootstrapv1.Format(format); {
		case !slices.Contains(bootstrapv1.Formats, f):
			errs = append(errs, field.NotSupported(at, format, formatNames()))
		case spec.EffectiveFormat() != bootstrapv1.CloudConfig && spec.EffectiveFormat() != f:
			errs = append(errs, field.Invalid(at, format, fmt.Sprintf(
				"contradicts spec.format %q: the annotation chooses the format only of a spec with the default format %q (as KubeadmControlPlane writes it)",
				spec.EffectiveFormat(), bootstrapv1.CloudConfig)))
		default:
			out.Format = f
		}
	}
	if hasButane {
		at := annotationsPath.Key(bootstrapv1.IgnitionButaneAnnotation)
		switch {
		case out.EffectiveFormat() != bootstrapv1.Ignition:
			errs = append(errs, field.Invalid(at, field.OmitValueType{}, fmt.Sprintf(
				"takes effect only in the %q format, and this KubeadmConfig renders %q", bootstrapv1.Ignition, out.EffectiveFormat())))
		case spec.Ignition.Butane.AdditionalConfig != "":
			errs = append(errs, field.Invalid(at, field.OmitValueType{}, "spec.ignition.butane.additionalConfig is set too: give the Butane document one way"))
		case strings.TrimSpace(butane) == "":
			errs = append(errs, field.Invalid(at, field.OmitValueType{}, "is empty"))
		case len(butane) > maxButaneAnnotation:
			errs = append(errs, field.TooLong(at, field.OmitValueType{}, maxButaneAnnotation))
		default:
			out.Ignition.Butane.AdditionalConfig = butane
		}
	}
	return out, errs
}

func formatNames() []string {
	var names []string
	for _, f := range bootstrapv1.Formats {
		names = append(names, string(f))
	}
	return names
}

// ValidateAnnotated validates what a KubeadmConfig (or the KubeadmConfig a
// KubeadmControlPlane makes) renders: its annotations, then the resolved
// spec through the table, reported at specPath. A format the annotation
// chose and its gate refuses is reported at the annotation, and so are the
// table's messages about it. Every problem is reported, whatever comes
// first: an update that ratchets one (see internal/webhooks) is still
// checked for the others.
func ValidateAnnotated(annotations map[string]string, spec *bootstrapv1.KubeadmConfigSpec, gates featuregate.FeatureGate, annotationsPath, specPath *field.Path) (*bootstrapv1.KubeadmConfigSpec, field.ErrorList, []string) {
	// What the annotations chose where they are valid; the spec's own
	// choice where they are not.
	resolved, errs := Resolve(annotations, spec, annotationsPath)
	src := source{format: resolved.EffectiveFormat()}
	if src.format != spec.EffectiveFormat() {
		src.annotation = bootstrapv1.FormatAnnotation
	}
	specErrs, warnings := validate(resolved, src, gates, specPath)
	if _, ok := annotations[bootstrapv1.IgnitionButaneAnnotation]; ok {
		// What the Butane translator says about the annotation's document.
		butane := specPath.Child("ignition", "butane").String()
		for _, e := range specErrs {
			if strings.HasPrefix(e.Field, butane) {
				e.Field = annotationsPath.Key(bootstrapv1.IgnitionButaneAnnotation).String()
			}
		}
	}
	if src.annotation != "" {
		format := specPath.Child("format").String()
		for _, e := range specErrs {
			if e.Field == format {
				// The gate refuses the format the annotation chose.
				e.Field = annotationsPath.Key(bootstrapv1.FormatAnnotation).String()
			}
		}
	}
	return resolved, append(errs, specErrs...), warnings
}
