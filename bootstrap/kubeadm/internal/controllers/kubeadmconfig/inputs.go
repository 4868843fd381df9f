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

package kubeadmconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
)

// controlPlaneInitialized follows the Cluster's ControlPlaneInitialized
// condition and its v1beta2 initialization flag.
func controlPlaneInitialized(c *clusterv1.Cluster) bool {
	return conditions.IsTrue(c, clusterv1.ClusterControlPlaneInitializedCondition) ||
		ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false)
}

// action decides what kubeadm does on this machine. The first control-plane
// machine takes the cluster's init lock and initializes; once the control plane
// is initialized, control-plane machines join it and workers join as workers.
func (r *Reconciler) action(ctx context.Context, s *scope) (plan.Action, outcome) {
	if !controlPlaneInitialized(s.cluster) {
		if !s.owner.isControlPlane() {
			s.dataNotAvailablef(bootstrapv1.KubeadmConfigWaitingForControlPlaneInitReason, "Waiting for the control plane of Cluster %s to be initialized", s.cluster.Name)
			return "", halt(ctrl.Result{})
		}
		// A Cluster moved or restored says nothing until Cluster API
		// computes its status again: its API server says whether a second
		// kubeadm init would make a second control plane.
		switch running, err := r.controlPlaneRunning(ctx, s); {
		case err != nil:
			return "", fail(err)
		case running:
			s.dataNotAvailablef(bootstrapv1.KubeadmConfigWaitingForControlPlaneInitReason,
				"The API server of Cluster %s already runs a control plane (it has %s); waiting for the Cluster to say it is initialized", s.cluster.Name, kubeadmConfigMap)
			return "", halt(ctrl.Result{RequeueAfter: waitRetry})
		}
		if !r.InitLock.Acquire(ctx, s.cluster, s.owner.machine) {
			s.dataNotAvailablef(bootstrapv1.KubeadmConfigWaitingForInitLockReason, "Another control-plane Machine holds the init lock of Cluster %s; this one joins once the control plane is initialized", s.cluster.Name)
			return "", halt(ctrl.Result{RequeueAfter: initLockRetry})
		}
		return plan.ActionInit, outcome{}
	}
	// Initialization is over: the lock has done its job. The cache says
	// whether there is one at all (no request per joining machine); the
	// release itself reads it live.
	if lock := r.initLockCached(ctx, s.cluster); lock != "" && r.lockReleases.begin(s.cluster.UID) {
		released := r.InitLock.Release(ctx, s.cluster, nil)
		r.lockReleases.end(s.cluster.UID, lock, released)
	}
	if s.owner.isControlPlane() {
		return plan.ActionJoinControlPlane, outcome{}
	}
	return plan.ActionJoin, outcome{}
}

// gatherInputs collects everything but the bootstrap token for action.
func (r *Reconciler) gatherInputs(ctx context.Context, s *scope, action plan.Action) (*plan.Input, outcome) {
	// The spec renders with the format and Butane its annotations choose
	// (KubeadmControlPlane copies them from its machine template).
	spec, errs := fieldrules.Resolve(s.cfg.Annotations, &s.cfg.Spec, field.NewPath("metadata", "annotations"))
	if len(errs) > 0 {
		r.refusef(s, bootstrapv1.KubeadmConfigInvalidConfigurationReason, "%s", errs.ToAggregate().Error())
		return nil, halt(ctrl.Result{})
	}
	if msg := fieldrules.FormatDisabled(spec.EffectiveFormat(), r.Gates); msg != "" {
		r.refusef(s, bootstrapv1.KubeadmConfigFormatFeatureDisabledReason, "%s", msg)
		return nil, halt(ctrl.Result{})
	}
	if _, _, err := plan.MachineVersion(s.owner.kubernetesVersion()); err != nil {
		r.refusef(s, bootstrapv1.KubeadmConfigInvalidKubernetesVersionReason, "%s: %v", s.owner, err)
		return nil, halt(ctrl.Result{})
	}
	if action != plan.ActionInit && needsClusterEndpoint(spec) && !s.cluster.Spec.ControlPlaneEndpoint.IsValid() {
		s.dataNotAvailablef(bootstrapv1.KubeadmConfigWaitingForControlPlaneEndpointReason, "Waiting for Cluster %s to have spec.controlPlaneEndpoint", s.cluster.Name)
		return nil, halt(ctrl.Result{})
	}
	certs, o := r.certificates(ctx, s, action)
	if o.stops() {
		return nil, o
	}
	values, o := r.referencedSecrets(ctx, s)
	if o.stops() {
		return nil, o
	}
	cpVersion, o := r.controlPlaneVersion(ctx, s)
	if o.stops() {
		return nil, o
	}

	c := s.cluster
	in := &plan.Input{
		Spec:   spec,
		Action: action,
		Cluster: plan.Cluster{
			Name:                c.Name,
			KubernetesVersion:   s.owner.kubernetesVersion(),
			ControlPlaneVersion: cpVersion,
			ServiceDomain:       c.Spec.ClusterNetwork.ServiceDomain,
		},
		Certificates: certs,
		ReadSecret:   values.read,
	}
	if c.Spec.ControlPlaneEndpoint.IsValid() {
		in.Cluster.ControlPlaneEndpoint = c.Spec.ControlPlaneEndpoint.String()
	}
	if len(c.Spec.ClusterNetwork.Services.CIDRBlocks) > 0 {
		in.Cluster.ServiceSubnet = c.Spec.ClusterNetwork.Services.String()
	}
	if len(c.Spec.ClusterNetwork.Pods.CIDRBlocks) > 0 {
		in.Cluster.PodSubnet = c.Spec.ClusterNetwork.Pods.String()
	}
	return in, outcome{}
}

// usesTokenDiscovery reports whether kubeadm join finds the cluster with a
// bootstrap token (the default) rather than a discovery file.
func usesTokenDiscovery(spec *bootstrapv1.KubeadmConfigSpec) bool {
	return !spec.JoinConfiguration.Discovery.File.IsDefined()
}

// needsClusterEndpoint reports whether a join's discovery takes the API
// server address from the Cluster.
func needsClusterEndpoint(spec *bootstrapv1.KubeadmConfigSpec) bool {
	d := spec.JoinConfiguration.Discovery
	if !usesTokenDiscovery(spec) {
		return d.File.KubeConfig.IsDefined() && d.File.KubeConfig.Cluster.Server == ""
	}
	return d.BootstrapToken.APIServerEndpoint == ""
}

// certificates looks up the cluster's CAs the action needs. The first control
// plane of a cluster without a control-plane provider generates them, owned by
// its KubeadmConfig, as upstream does; everyone else waits for them.
func (r *Reconciler) certificates(ctx context.Context, s *scope, action plan.Action) (secret.Certificates, outcome) {
	certs := plan.CertificatesFor(action, &s.cfg.Spec)
	key := util.ObjectKey(s.cluster)
	var err error
	if action == plan.ActionInit && !s.cluster.Spec.ControlPlaneRef.IsDefined() {
		owner := *metav1.NewControllerRef(s.cfg, bootstrapv1.GroupVersion.WithKind("KubeadmConfig"))
		err = certs.LookupOrGenerateCached(ctx, r.CachingClient, r.Client, key, owner)
	} else if err = certs.LookupCached(ctx, r.CachingClient, r.Client, key); err == nil {
		err = certs.EnsureAllExist()
	}
	for _, c := range certs {
		if c.KeyPair != nil {
			s.addSensitive(string(c.KeyPair.Key))
		}
	}
	switch {
	case err == nil:
		s.certificatesAvailable()
		return certs, outcome{}
	case errors.Is(err, secret.ErrMissingCertificate), errors.Is(err, secret.ErrMissingCrt), errors.Is(err, secret.ErrMissingKey):
		s.certificatesNotAvailablef(metav1.ConditionFalse, bootstrapv1.KubeadmConfigCertificatesMissingReason, "Waiting for the certificates of Cluster %s: %v", s.cluster.Name, err)
		return nil, halt(ctrl.Result{RequeueAfter: waitRetry})
	case apierrors.IsNotFound(err):
		s.certificatesNotAvailablef(metav1.ConditionFalse, bootstrapv1.KubeadmConfigCertificatesMissingReason, "Waiting for the certificates of Cluster %s: %v", s.cluster.Name, err)
		return nil, halt(ctrl.Result{RequeueAfter: waitRetry})
	case isAPIError(err):
		s.certificatesNotAvailablef(metav1.ConditionUnknown, bootstrapv1.KubeadmConfigInternalErrorReason, "Reading the certificates of Cluster %s failed; retrying", s.cluster.Name)
		return nil, fail(err)
	default:
		r.warnf(s, upstreambootstrapv1.KubeadmConfigCertificatesAvailableCondition, bootstrapv1.KubeadmConfigCertificatesCorruptedReason, "The certificates of Cluster %s cannot be used: %v", s.cluster.Name, err)
		return nil, halt(ctrl.Result{})
	}
}

// isAPIError reports whether err (or what it wraps) came from the API server.
func isAPIError(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// secretValues are the Secret keys a spec references, read once per reconcile.
type secretValues map[plan.SecretRef][]byte

func (v secretValues) read(ref plan.SecretRef) ([]byte, error) {
	if b, ok := v[ref]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("Secret %s key %s was not read", ref.Name, ref.Key)
}

// referencedSecrets reads the Secrets behind spec.files[].contentFrom and
// spec.users[].passwdFrom from the config's namespace, live (such Secrets are
// not cached), each once. A missing Secret or key is waited for: the user may
// create it after the config. Only the values used are kept, and they are
// booked on the config's content budget as they are read: a spec naming many
// large Secrets is refused at the first value past the bound, not after all
// of them are in memory.
func (r *Reconciler) referencedSecrets(ctx context.Context, s *scope) (secretValues, outcome) {
	type use struct {
		field *field.Path
		ref   plan.SecretRef
	}
	var uses []use
	for i, f := range s.cfg.Spec.Files {
		if f.ContentFrom.IsDefined() {
			uses = append(uses, use{field.NewPath("spec", "files").Index(i).Child("contentFrom"), plan.SecretRef{Name: f.ContentFrom.Secret.Name, Key: f.ContentFrom.Secret.Key}})
		}
	}
	for i, u := range s.cfg.Spec.Users {
		if u.PasswdFrom.IsDefined() {
			uses = append(uses, use{field.NewPath("spec", "users").Index(i).Child("passwdFrom"), plan.SecretRef{Name: u.PasswdFrom.Secret.Name, Key: u.PasswdFrom.Secret.Key}})
		}
	}
	// Each Secret is first looked for by its metadata: while one is
	// missing, none is read in full.
	looked := map[string]bool{}
	for _, u := range uses {
		if looked[u.ref.Name] {
			continue
		}
		looked[u.ref.Name] = true
		meta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: u.ref.Name}, meta); err != nil {
			if apierrors.IsNotFound(err) {
				s.dataNotAvailablef(bootstrapv1.KubeadmConfigReferencedSecretNotFoundReason, "%s: Secret %s/%s not found", u.field, s.cfg.Namespace, u.ref.Name)
				return nil, halt(ctrl.Result{RequeueAfter: r.waitingBackoff(s)})
			}
			return nil, fail(fmt.Errorf("looking for Secret %s/%s for %s: %w", s.cfg.Namespace, u.ref.Name, u.field, err))
		}
	}
	values := secretValues{}
	var budget machinechecks.Budget
	for _, u := range uses {
		if _, ok := values[u.ref]; ok {
			continue
		}
		sec := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: u.ref.Name}, sec); err != nil {
			if apierrors.IsNotFound(err) {
				s.dataNotAvailablef(bootstrapv1.KubeadmConfigReferencedSecretNotFoundReason, "%s: Secret %s/%s not found", u.field, s.cfg.Namespace, u.ref.Name)
				return nil, halt(ctrl.Result{RequeueAfter: r.waitingBackoff(s)})
			}
			return nil, fail(fmt.Errorf("reading Secret %s/%s for %s: %w", s.cfg.Namespace, u.ref.Name, u.field, err))
		}
		// Every key this Secret gives the spec, so that it is read once.
		for _, other := range uses {
			if other.ref.Name != u.ref.Name {
				continue
			}
			b, ok := sec.Data[other.ref.Key]
			if !ok {
				s.dataNotAvailablef(bootstrapv1.KubeadmConfigReferencedSecretNotFoundReason, "%s: Secret %s/%s has no key %q", other.field, s.cfg.Namespace, other.ref.Name, other.ref.Key)
				return nil, halt(ctrl.Result{RequeueAfter: r.waitingBackoff(s)})
			}
			if _, seen := values[other.ref]; seen {
				continue
			}
			if err := budget.Spend(other.field, len(b)); err != nil {
				r.refusef(s, bootstrapv1.KubeadmConfigContentTooLargeReason, "%v", err)
				return nil, halt(ctrl.Result{})
			}
			s.addSensitive(string(b))
			values[other.ref] = b
		}
	}
	return values, outcome{}
}

// maxWaitRetry is the longest a config waiting for a referenced Secret waits
// between looks (no watch reports Secrets: they are not cached).
const maxWaitRetry = 5 * time.Minute

// waitingBackoff is how long a config waiting for a referenced Secret waits
// before it looks again: as long as it has waited so far (since its
// DataSecretAvailable condition turned False), from waitRetry up to
// maxWaitRetry, so that a Secret nobody creates costs a few reads an hour.
func (r *Reconciler) waitingBackoff(s *scope) time.Duration {
	waited := time.Duration(0)
	if c := conditions.Get(s.cfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition); c != nil && c.Status == metav1.ConditionFalse {
		waited = r.clock().Since(c.LastTransitionTime.Time)
	}
	return min(max(waited, waitRetry), maxWaitRetry)
}

// controlPlaneVersion is .controlPlane.version for spec.files templates: the
// spec.version of the Cluster's control plane, read only when a template can
// use it. Unknown (no control plane object, or no version on it) is "".
func (r *Reconciler) controlPlaneVersion(ctx context.Context, s *scope) (string, outcome) {
	ref := s.cluster.Spec.ControlPlaneRef
	if !plan.TemplatesFiles(&s.cfg.Spec) || !ref.IsDefined() {
		return "", outcome{}
	}
	obj, err := external.GetObjectFromContractVersionedRef(ctx, r.APIReader, ref, s.cluster.Namespace)
	if err != nil {
		s.dataNotAvailablef(bootstrapv1.KubeadmConfigControlPlaneVersionUnavailableReason, "spec.files templates need the version of %s %s, which cannot be read: %v", ref.Kind, ref.Name, err)
		return "", halt(ctrl.Result{RequeueAfter: waitRetry})
	}
	// A control plane without a string spec.version has no known version.
	version, _, _ := unstructured.NestedString(obj.Object, "spec", "version")
	return version, outcome{}
}
