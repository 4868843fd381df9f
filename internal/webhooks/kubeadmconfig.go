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

// Package webhooks holds the admission webhooks for KubeadmConfig and
// KubeadmConfigTemplate: defaulting of the format, and validation through the
// per-format field rule table (internal/fieldrules); the same registrations
// serve v1beta1 ↔ v1beta2 conversion (internal/webhooks/conversion).
package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/webhooks/conversion"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-bootstrap-cluster-x-k8s-io-v1beta2-kubeadmconfig,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs,versions=v1beta2,name=default.kubeadmconfig.bootstrap.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-bootstrap-cluster-x-k8s-io-v1beta2-kubeadmconfig,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs,versions=v1beta2,name=validation.kubeadmconfig.bootstrap.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubeadmConfig defaults and validates KubeadmConfigs.
type KubeadmConfig struct {
	// Gates decides which formats are enabled.
	Gates featuregate.FeatureGate
	// Reader reads, live, what owns a config being created (see
	// recreation); nil treats every create as a new object.
	Reader client.Reader
}

var (
	_ admission.Defaulter[*bootstrapv1.KubeadmConfig] = &KubeadmConfig{}
	_ admission.Validator[*bootstrapv1.KubeadmConfig] = &KubeadmConfig{}
)

// SetupWebhookWithManager registers the webhooks with mgr's webhook server.
func (w *KubeadmConfig) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &bootstrapv1.KubeadmConfig{}).
		WithDefaulter(w).
		WithValidator(w).
		WithConverter(conversion.KubeadmConfig).
		Complete()
}

// Default sets the format when it is empty, so that every stored object says
// which format it renders.
func (w *KubeadmConfig) Default(_ context.Context, c *bootstrapv1.KubeadmConfig) error {
	defaultSpec(&c.Spec)
	return nil
}

func defaultSpec(s *bootstrapv1.KubeadmConfigSpec) {
	if s.Format == "" {
		s.Format = bootstrapv1.CloudConfig
	}
}

// ValidateCreate validates a new KubeadmConfig; one that clusterctl move or
// a restore brings back is validated as its update to itself.
func (w *KubeadmConfig) ValidateCreate(ctx context.Context, c *bootstrapv1.KubeadmConfig) (admission.Warnings, error) {
	errs, warnings := validateConfig(c, w.Gates)
	if len(errs) > 0 && (recreation{w.Reader}).of(ctx, c) {
		return w.ValidateUpdate(ctx, c, c)
	}
	return warnings, invalid("KubeadmConfig", c.Name, errs)
}

// validateConfig checks what the KubeadmConfig renders: its spec with the
// format and Butane its annotations choose.
func validateConfig(c *bootstrapv1.KubeadmConfig, gates featuregate.FeatureGate) (field.ErrorList, []string) {
	_, errs, warnings := fieldrules.ValidateAnnotated(c.Annotations, &c.Spec, gates, field.NewPath("metadata", "annotations"), field.NewPath("spec"))
	return errs, warnings
}

// ValidateUpdate validates a changed KubeadmConfig. Like upstream, the spec
// may change. A Machine's config renders once: changes do not reach its
// existing data secret, and spec.format may not change then, because the
// secret's format key and every consumer of it would disagree with the spec.
// A MachinePool's config is rendered again when its spec changes (a
// ClusterClass topology change patches it in place), so there the format may
// change too, and the annotations still count.
//
// Once a Machine's data secret exists the annotations choose nothing any more
// (the secret keeps the format it was rendered in), so the spec is checked as
// it is, without them: KubeadmControlPlane writes its machine template's new
// annotations in place onto configs it made long ago (a control plane moved
// to another format while its old machines await their rollout), and
// refusing that would stop KCP for a change without effect.
//
// Every update ratchets (see ratchet): what was refused only because a rule
// is newer than the object, or stricter than upstream's provider that
// admitted it, is refused only where the update changes it.
func (w *KubeadmConfig) ValidateUpdate(_ context.Context, oldC, newC *bootstrapv1.KubeadmConfig) (admission.Warnings, error) {
	if !dataSecretExists(oldC) || ownedByMachinePool(oldC) {
		errs, warnings := validateConfig(newC, w.Gates)
		if len(errs) > 0 {
			oldErrs, _ := validateConfig(oldC, w.Gates)
			errs = ratchet(errs, oldErrs, oldC, newC)
		}
		if dataSecretExists(oldC) {
			warnings = append(warnings, annotationWarnings(oldC, newC,
				"reaches the MachinePool's data secret %q when it is next rendered (a change of spec, or a token rotation)")...)
		}
		return warnings, invalid("KubeadmConfig", newC.Name, errs)
	}
	errs, warnings := fieldrules.ValidateWithWarnings(&newC.Spec, w.Gates, field.NewPath("spec"))
	if len(errs) > 0 {
		oldErrs, _ := fieldrules.ValidateWithWarnings(&oldC.Spec, w.Gates, field.NewPath("spec"))
		errs = ratchet(errs, oldErrs, oldC, newC)
	}
	warnings = append(warnings, annotationWarnings(oldC, newC, "changes nothing: the bootstrap data secret %q already exists")...)
	if oldC.Spec.EffectiveFormat() != newC.Spec.EffectiveFormat() {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "format"), fmt.Sprintf(
			"cannot change from %q to %q: the bootstrap data secret %q already exists in format %q",
			oldC.Spec.EffectiveFormat(), newC.Spec.EffectiveFormat(), oldC.Status.DataSecretName, oldC.Spec.EffectiveFormat())))
	}
	return warnings, invalid("KubeadmConfig", newC.Name, errs)
}

// annotationWarnings warns of each of this provider's annotations the update
// changes once the data secret exists; what says what that does, with the
// secret's name.
func annotationWarnings(oldC, newC *bootstrapv1.KubeadmConfig, what string) []string {
	var warnings []string
	annotations := field.NewPath("metadata", "annotations")
	for _, a := range []string{bootstrapv1.FormatAnnotation, bootstrapv1.IgnitionButaneAnnotation} {
		if oldC.Annotations[a] != newC.Annotations[a] {
			warnings = append(warnings, annotations.Key(a).String()+": "+fmt.Sprintf(what, oldC.Status.DataSecretName))
		}
	}
	return warnings
}

// ownedByMachinePool reports whether a MachinePool owns the config (Cluster
// API's MachinePool controller adds the reference to its bootstrap config).
func ownedByMachinePool(c *bootstrapv1.KubeadmConfig) bool {
	for _, ref := range c.OwnerReferences {
		if ref.Kind == "MachinePool" && groupOf(ref.APIVersion) == clusterv1.GroupVersion.Group {
			return true
		}
	}
	return false
}

// ValidateDelete allows every deletion.
func (w *KubeadmConfig) ValidateDelete(context.Context, *bootstrapv1.KubeadmConfig) (admission.Warnings, error) {
	return nil, nil
}

func dataSecretExists(c *bootstrapv1.KubeadmConfig) bool {
	return c.Status.DataSecretName != "" || ptr.Deref(c.Status.Initialization.DataSecretCreated, false)
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(bootstrapv1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
