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

package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	upstreamadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	"sigs.k8s.io/cluster-api/util/topology"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/webhooks/conversion"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-bootstrap-cluster-x-k8s-io-v1beta2-kubeadmconfigtemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigtemplates,versions=v1beta2,name=default.kubeadmconfigtemplate.bootstrap.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-bootstrap-cluster-x-k8s-io-v1beta2-kubeadmconfigtemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigtemplates,versions=v1beta2,name=validation.kubeadmconfigtemplate.bootstrap.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubeadmConfigTemplate defaults and validates KubeadmConfigTemplates; the
// rules are the KubeadmConfig ones, applied at spec.template.spec.
type KubeadmConfigTemplate struct {
	Gates featuregate.FeatureGate
	// Reader reads, live, what owns a template being created (see
	// recreation); nil treats every create as a new object.
	Reader client.Reader
}

var (
	_ admission.Defaulter[*bootstrapv1.KubeadmConfigTemplate] = &KubeadmConfigTemplate{}
	_ admission.Validator[*bootstrapv1.KubeadmConfigTemplate] = &KubeadmConfigTemplate{}
)

// SetupWebhookWithManager registers the webhooks with mgr's webhook server.
func (w *KubeadmConfigTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &bootstrapv1.KubeadmConfigTemplate{}).
		WithDefaulter(w).
		WithValidator(w).
		WithConverter(conversion.KubeadmConfigTemplate).
		Complete()
}

// Default sets the format when empty. For the topology controller's dry-run
// requests it also applies the defaults upstream used to set, as upstream
// does, so ClusterClass-managed templates created before do not roll out.
func (w *KubeadmConfigTemplate) Default(ctx context.Context, t *bootstrapv1.KubeadmConfigTemplate) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("expected an admission request in the context: %v", err))
	}
	spec := &t.Spec.Template.Spec
	if topology.IsDryRunRequest(req, t) {
		applyPreviousUpstreamDefaults(spec)
	}
	defaultSpec(spec)
	return nil
}

// applyPreviousUpstreamDefaults runs upstream's own function on the fields it
// touches (ours share upstream's types there).
func applyPreviousUpstreamDefaults(spec *bootstrapv1.KubeadmConfigSpec) {
	up := upstreambootstrapv1.KubeadmConfigSpec{
		InitConfiguration: spec.InitConfiguration,
		JoinConfiguration: spec.JoinConfiguration,
		Format:            upstreambootstrapv1.Format(spec.Format),
	}
	upstreamadmission.ApplyPreviousKubeadmConfigDefaults(&up)
	spec.InitConfiguration, spec.JoinConfiguration = up.InitConfiguration, up.JoinConfiguration
	if spec.Format == "" {
		spec.Format = bootstrapv1.Format(up.Format)
	}
}

// ValidateCreate validates a new template; one that clusterctl move or a
// restore brings back is validated as its update to itself.
func (w *KubeadmConfigTemplate) ValidateCreate(ctx context.Context, t *bootstrapv1.KubeadmConfigTemplate) (admission.Warnings, error) {
	errs, warnings := w.validate(t)
	if len(errs) > 0 && (recreation{w.Reader}).of(ctx, t) {
		errs = ratchet(errs, errs, t, t)
	}
	return warnings, invalid("KubeadmConfigTemplate", t.Name, errs)
}

// ValidateUpdate validates a changed template; templates may change (as
// upstream), and updates ratchet (see ratchet).
func (w *KubeadmConfigTemplate) ValidateUpdate(_ context.Context, oldT, t *bootstrapv1.KubeadmConfigTemplate) (admission.Warnings, error) {
	errs, warnings := w.validate(t)
	if len(errs) > 0 {
		oldErrs, _ := w.validate(oldT)
		errs = ratchet(errs, oldErrs, oldT, t)
	}
	return warnings, invalid("KubeadmConfigTemplate", t.Name, errs)
}

// ValidateDelete allows every deletion.
func (w *KubeadmConfigTemplate) ValidateDelete(context.Context, *bootstrapv1.KubeadmConfigTemplate) (admission.Warnings, error) {
	return nil, nil
}

// validate returns the template's errors and admission warnings.
func (w *KubeadmConfigTemplate) validate(t *bootstrapv1.KubeadmConfigTemplate) (field.ErrorList, admission.Warnings) {
	_, errs, warnings := fieldrules.ValidateAnnotated(t.Spec.Template.ObjectMeta.Annotations, &t.Spec.Template.Spec, w.Gates,
		field.NewPath("spec", "template", "metadata", "annotations"), field.NewPath("spec", "template", "spec"))
	errs = append(errs, t.Spec.Template.ObjectMeta.Validate(field.NewPath("spec", "template", "metadata"))...)
	return errs, warnings
}
