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
	"encoding/json"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/supportedversions"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane-bootstrap,mutating=false,failurePolicy=ignore,matchPolicy=Equivalent,groups=controlplane.cluster.x-k8s.io,resources=kubeadmcontrolplanes;kubeadmcontrolplanetemplates,versions=v1beta2,name=bootstrap.kubeadmcontrolplane.bootstrap.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// KubeadmControlPlanePath is where KubeadmControlPlaneBootstrap is served.
const KubeadmControlPlanePath = "/validate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane-bootstrap"

// KubeadmControlPlaneBootstrap validates, in KubeadmControlPlanes and their
// templates (which ClusterClass patches fill), what the KubeadmConfigs
// KubeadmControlPlane will create render: kubeadmConfigSpec with the format
// and Butane that spec.machineTemplate.metadata's annotations choose, through
// the same rules as a KubeadmConfig, and a KubeadmControlPlane's
// spec.version against the Kubernetes versions this provider supports
// (supportedversions). KubeadmControlPlane's own webhook and
// CRD know nothing of those annotations; without this a gated or
// contradictory format would only fail once KCP creates a machine. An update
// is checked only when what it renders changes, so that objects that were
// admitted before (KCP's own status and label updates, scaling) stay
// writable.
//
// Its failure policy is Ignore: it reports early what the KubeadmConfig
// webhook (fail-closed) refuses anyway when KCP creates each machine's
// config, so while this manager is down KubeadmControlPlanes stay writable
// (KCP's own finalizer and scale patches, clusterctl move) and nothing
// unchecked renders.
type KubeadmControlPlaneBootstrap struct {
	Gates featuregate.FeatureGate
	// Reader reads, live, what owns an object being created (see
	// recreation); nil treats every create as a new object.
	Reader client.Reader
}

// SetupWebhookWithManager registers the webhook with mgr's webhook server.
func (w *KubeadmControlPlaneBootstrap) SetupWebhookWithManager(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(KubeadmControlPlanePath, &webhook.Admission{Handler: w})
	return nil
}

// kcpBootstrapPart is the part of a KubeadmControlPlane (spec) or of a
// KubeadmControlPlaneTemplate (spec.template.spec) that makes KubeadmConfigs.
type kcpBootstrapPart struct {
	// Version is a KubeadmControlPlane's; a template has none (its
	// Cluster's topology gives it).
	Version         string `json:"version,omitempty"`
	MachineTemplate struct {
		ObjectMeta struct {
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"metadata"`
	} `json:"machineTemplate"`
	KubeadmConfigSpec bootstrapv1.KubeadmConfigSpec `json:"kubeadmConfigSpec"`
}

// decodeKCP reads the bootstrap part of a KubeadmControlPlane or its
// template, with the paths its errors are reported at.
func decodeKCP(kind string, raw []byte) (part *kcpBootstrapPart, annotationsPath, specPath *field.Path, err error) {
	switch kind {
	case "KubeadmControlPlane":
		var o struct {
			Spec kcpBootstrapPart `json:"spec"`
		}
		err = json.Unmarshal(raw, &o)
		return &o.Spec, field.NewPath("spec", "machineTemplate", "metadata", "annotations"), field.NewPath("spec", "kubeadmConfigSpec"), err
	case "KubeadmControlPlaneTemplate":
		var o struct {
			Spec struct {
				Template struct {
					Spec kcpBootstrapPart `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		err = json.Unmarshal(raw, &o)
		return &o.Spec.Template.Spec, field.NewPath("spec", "template", "spec", "machineTemplate", "metadata", "annotations"),
			field.NewPath("spec", "template", "spec", "kubeadmConfigSpec"), err
	}
	return nil, nil, nil, fmt.Errorf("kind %s is not a KubeadmControlPlane or a KubeadmControlPlaneTemplate", kind)
}

// Handle admits or denies one request.
func (w *KubeadmControlPlaneBootstrap) Handle(ctx context.Context, req admission.Request) admission.Response {
	part, annotationsPath, specPath, err := decodeKCP(req.Kind.Kind, req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	errs, warnings := w.validate(part, annotationsPath, specPath)
	switch {
	case len(errs) == 0:
	case len(req.OldObject.Raw) > 0:
		// Ratchet: what is as it was may stay as it is.
		if old, _, _, err := decodeKCP(req.Kind.Kind, req.OldObject.Raw); err == nil {
			oldErrs, _ := w.validate(old, annotationsPath, specPath)
			errs = ratchet(errs, oldErrs, req.OldObject.Raw, req.Object.Raw)
		}
	default:
		// Brought back by clusterctl move or a restore: as its update to itself.
		meta := &metav1.PartialObjectMetadata{}
		if json.Unmarshal(req.Object.Raw, meta) == nil && (recreation{w.Reader}).of(ctx, meta) {
			errs = ratchet(errs, errs, req.Object.Raw, req.Object.Raw)
		}
	}
	if len(errs) > 0 {
		return admission.Denied(fmt.Sprintf("%s %q is invalid for the bootstrap provider: %v", req.Kind.Kind, req.Name, errs.ToAggregate()))
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// validate checks what part renders and, for a KubeadmControlPlane, its
// version. The version is checked here, for the KubeadmControlPlane a user
// writes, because the KubeadmConfigs it makes carry none: their machines'
// versions reach the controller only.
func (w *KubeadmControlPlaneBootstrap) validate(part *kcpBootstrapPart, annotationsPath, specPath *field.Path) (field.ErrorList, []string) {
	_, errs, warnings := fieldrules.ValidateAnnotated(part.MachineTemplate.ObjectMeta.Annotations, &part.KubeadmConfigSpec, w.Gates, annotationsPath, specPath)
	if part.Version != "" {
		if err := supportedversions.Check(part.Version); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "version"), part.Version, err.Error()))
		}
	}
	return errs, warnings
}
