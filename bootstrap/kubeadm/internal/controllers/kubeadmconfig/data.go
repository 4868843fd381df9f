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
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstrapdata"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
)

// reconcileData produces the data secret of a config that has none.
func (r *Reconciler) reconcileData(ctx context.Context, s *scope) outcome {
	switch written, err := r.writtenBefore(ctx, s); {
	case err != nil:
		return fail(err)
	case written:
		// Look after its token on the next round.
		return done(ctrl.Result{RequeueAfter: cacheLag})
	}
	if !ptr.Deref(s.cluster.Status.Initialization.InfrastructureProvisioned, false) {
		s.dataNotAvailablef(bootstrapv1.KubeadmConfigWaitingForClusterInfrastructureReason, "Waiting for the infrastructure of Cluster %s to be provisioned", s.cluster.Name)
		return outcome{}
	}
	action, o := r.action(ctx, s)
	if o.stops() {
		return o
	}
	o = r.writeData(ctx, s, action)
	if o.stops() && action == plan.ActionInit && !s.hadData && !r.dataSecretExists(ctx, s) {
		// No init data was ever handed out: another control-plane Machine
		// may initialize instead of waiting for this one to be fixed. Once
		// it was (its secret deleted since), this machine may be running
		// kubeadm init: a second one would make a second etcd.
		r.InitLock.Release(ctx, s.cluster, s.owner.machine)
	}
	return o
}

// dataSecretExists reports whether the config's data secret exists, reading
// the API server; when that fails it says yes, the answer that keeps an init
// lock held.
func (r *Reconciler) dataSecretExists(ctx context.Context, s *scope) bool {
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.cfg), &corev1.Secret{})
	return !apierrors.IsNotFound(err)
}

// writeData renders the data for action and writes the data secret.
func (r *Reconciler) writeData(ctx context.Context, s *scope, action plan.Action) outcome {
	tok, expires, o := r.joinToken(ctx, s, action)
	if o.stops() {
		return o
	}
	out, o := r.render(ctx, s, action)
	if o.stops() {
		return o
	}
	out.token, out.expires = tok, expires
	if o := r.putDataSecret(ctx, s, out, nil); o.stops() {
		return o
	}
	s.cfg.Status.DataSecretName = out.name
	s.cfg.Status.Initialization.DataSecretCreated = ptr.To(true)
	s.dataAvailable()
	ctrl.LoggerFrom(ctx).Info("Created the bootstrap data secret", "action", action, "format", out.data.Format, "Secret", out.name)
	if action == plan.ActionInit {
		r.Recorder.Eventf(s.cfg, s.owner.object(), corev1.EventTypeNormal, bootstrapv1.ControlPlaneInitDataEvent, "Bootstrap",
			"%s initializes the control plane of Cluster %s", s.owner, s.cluster.Name)
	}
	if out.token == nil {
		return outcome{}
	}
	return done(r.scheduleTokenCheck(s, out.token.ID, out.expires))
}

// cacheLag is how long a just-written object may take to reach the cache.
const cacheLag = 2 * time.Second

// writtenBefore finds a data secret this very config wrote without its status
// being saved (an interrupted reconcile) and records it, instead of rendering
// again. A secret written moments ago most likely has its status saved too,
// in a copy of the config the cache has not seen yet: that reconcile waits
// for the cache rather than writing the same status a second time.
func (r *Reconciler) writtenBefore(ctx context.Context, s *scope) (bool, error) {
	sec := &corev1.Secret{}
	if err := r.CachingClient.Get(ctx, client.ObjectKeyFromObject(s.cfg), sec); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("looking for an existing data secret: %w", err)
	}
	if c := metav1.GetControllerOf(sec); c == nil || c.UID != s.cfg.UID {
		return false, nil
	}
	if r.clock().Since(sec.CreationTimestamp.Time) < 5*cacheLag {
		s.keepStatus = true
		return true, nil
	}
	s.cfg.Status.DataSecretName = sec.Name
	s.cfg.Status.Initialization.DataSecretCreated = ptr.To(true)
	s.dataAvailable()
	s.certificatesAvailable()
	return true, nil
}

// rendered is bootstrap data with the token a provider made for it, if any,
// and, for a rotation, the token the data carried before. name is the data
// secret it belongs in: the config's name, or a MachinePool's revision.
type rendered struct {
	data     *bootstrapdata.Data
	token    *bootstraptoken.Token
	previous *bootstraptoken.Token
	expires  time.Time
	name     string
	// previousSecret is the revision a pool's new revision follows, and
	// carried the annotations it takes over from it.
	previousSecret string
	carried        map[string]string
}

// render gathers the inputs and renders the format. A join's token is the
// one in the spec (joinToken put it there).
func (r *Reconciler) render(ctx context.Context, s *scope, action plan.Action) (*rendered, outcome) {
	in, o := r.gatherInputs(ctx, s, action)
	if o.stops() {
		return nil, o
	}
	s.specToken()
	out := &rendered{}
	p, err := plan.Build(*in)
	if err != nil {
		r.refusef(s, planRefusal(err), "%v", err)
		return nil, halt(ctrl.Result{})
	}
	if out.data, err = bootstrapdata.Render(p); err != nil {
		r.refusef(s, bootstrapv1.KubeadmConfigRenderFailedReason, "The %s renderer refused the configuration: %v", p.Format, err)
		return nil, halt(ctrl.Result{})
	}
	out.name = s.cfg.Name
	if s.owner.pool != nil {
		if out.name, err = revisionName(s.cfg.Name, p, s.cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token); err != nil {
			return nil, fail(err)
		}
	}
	if err := out.data.FitsSecret(); err != nil {
		r.refusef(s, bootstrapv1.KubeadmConfigBootstrapDataTooLargeReason, "%s", capitalized(err.Error()))
		return nil, halt(ctrl.Result{})
	}
	r.checkSize(s, out.data)
	return out, outcome{}
}

// planRefusal is the condition reason for an error of plan.Build.
func planRefusal(err error) string {
	var te *plan.TemplateError
	var ve *plan.VersionError
	var ce *machinechecks.ContentError
	switch {
	case errors.As(err, &te):
		return bootstrapv1.KubeadmConfigFileTemplateFailedReason
	case errors.As(err, &ve):
		return bootstrapv1.KubeadmConfigInvalidKubernetesVersionReason
	case errors.As(err, &ce) && ce.OverBudget:
		return bootstrapv1.KubeadmConfigContentTooLargeReason
	case errors.As(err, &ce):
		// Content from a Secret that does not decode (admission checks
		// what is inline).
		return bootstrapv1.KubeadmConfigRenderFailedReason
	}
	return bootstrapv1.KubeadmConfigInvalidConfigurationReason
}

// capitalized is msg as a condition's message begins: with a capital.
func capitalized(msg string) string {
	if msg == "" {
		return msg
	}
	return strings.ToUpper(msg[:1]) + msg[1:]
}

// checkSize reports data larger than --bootstrap-data-size-limit. The secret
// is written anyway: whether the infrastructure takes it is its decision, and
// the condition and event say why a machine may not get it.
func (r *Reconciler) checkSize(s *scope, d *bootstrapdata.Data) {
	if r.DataSizeLimit <= 0 {
		s.deleteCondition(bootstrapv1.KubeadmConfigBootstrapDataSizeWithinLimitCondition)
		return
	}
	size := d.Size()
	if size <= r.DataSizeLimit {
		s.setConditionf(bootstrapv1.KubeadmConfigBootstrapDataSizeWithinLimitCondition, metav1.ConditionTrue, bootstrapv1.KubeadmConfigBootstrapDataSizeWithinLimitReason, "")
		return
	}
	hint := "set spec.gzipUserData: true to compress it, or move content out of the spec (files from secrets the machine fetches)"
	if ptr.Deref(s.cfg.Spec.GzipUserData, false) || d.Format == bootstrapv1.Raw {
		hint = "move content out of the spec (files from secrets the machine fetches)"
	}
	r.warnf(s, bootstrapv1.KubeadmConfigBootstrapDataSizeWithinLimitCondition, bootstrapv1.KubeadmConfigBootstrapDataTooLargeReason,
		"The %s bootstrap data is %d bytes, over the limit of %d bytes (--bootstrap-data-size-limit); the infrastructure may refuse it: %s",
		d.Format, size, r.DataSizeLimit, hint)
}

// refusef reports why there is no data when only a person can fix it (the
// spec, what it refers to, the manager's flags), with a warning event when the
// config enters that state.
func (r *Reconciler) refusef(s *scope, reason, format string, args ...any) {
	r.warnf(s, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition, reason, format, args...)
}

func (r *Reconciler) warnf(s *scope, conditionType, reason, format string, args ...any) {
	// The reason is copied: Get points into the conditions that Set rewrites.
	prevReason := ""
	if prev := conditions.Get(s.cfg, conditionType); prev != nil {
		prevReason = prev.Reason
	}
	s.setConditionf(conditionType, metav1.ConditionFalse, reason, format, args...)
	if prevReason != reason {
		r.Recorder.Eventf(s.cfg, nil, corev1.EventTypeWarning, reason, "Bootstrap", "%s", conditions.Get(s.cfg, conditionType).Message)
	}
}

// desiredDataSecret is the data secret for out: named after the config (a
// MachinePool's after its revision), controlled by it, labelled with the cluster, of Cluster API's secret type.
func desiredDataSecret(s *scope, out *rendered) *corev1.Secret {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            out.name,
			Namespace:       s.cfg.Namespace,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s.cfg, bootstrapv1.GroupVersion.WithKind("KubeadmConfig"))},
		},
		Type: clusterv1.ClusterSecretType,
		Data: out.data.SecretData(),
	}
	sec.Annotations = mergeMaps(generationAnnotations(s.cfg), out.carried)
	if out.previousSecret != "" {
		sec.Annotations[bootstrapv1.PreviousDataSecretAnnotation] = out.previousSecret
	}
	if out.token != nil {
		sec.Annotations = mergeMaps(sec.Annotations, tokenAnnotations(*out.token))
	}
	if out.previous != nil {
		sec.Annotations = mergeMaps(sec.Annotations, map[string]string{
			bootstrapv1.PreviousBootstrapTokenIDAnnotation: out.previous.ID, bootstrapv1.PreviousBootstrapTokenHashAnnotation: out.previous.Hash()})
	}
	return sec
}

// generationAnnotations record on a data secret which config, at which
// generation, its data was rendered from.
func generationAnnotations(cfg *bootstrapv1.KubeadmConfig) map[string]string {
	return map[string]string{bootstrapv1.ConfigGenerationAnnotation: strconv.FormatInt(cfg.Generation, 10), bootstrapv1.ConfigUIDAnnotation: string(cfg.UID)}
}

// tokenAnnotations record on a data secret the token its data carries.
func tokenAnnotations(tok bootstraptoken.Token) map[string]string {
	return map[string]string{bootstrapv1.BootstrapTokenIDAnnotation: tok.ID, bootstrapv1.BootstrapTokenHashAnnotation: tok.Hash()}
}

// tokenAnnotationKeys are every annotation that names a token on a data secret.
var tokenAnnotationKeys = []string{bootstrapv1.BootstrapTokenIDAnnotation, bootstrapv1.BootstrapTokenHashAnnotation,
	bootstrapv1.PreviousBootstrapTokenIDAnnotation, bootstrapv1.PreviousBootstrapTokenHashAnnotation}

// putDataSecret writes out to the config's data secret: created, or, when a
// Secret of that name exists (an interrupted earlier attempt, a restore, a
// rotation), updated if it is this config's to take. A Secret that belongs to
// someone else is never overwritten.
func (r *Reconciler) putDataSecret(ctx context.Context, s *scope, out *rendered, existing *corev1.Secret) outcome {
	want := desiredDataSecret(s, out)
	if existing == nil {
		err := r.Client.Create(ctx, want)
		if err == nil {
			return outcome{}
		}
		if !apierrors.IsAlreadyExists(err) {
			return fail(fmt.Errorf("creating the data secret %s: %w", klog.KObj(want), err))
		}
		existing = &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), existing); err != nil {
			return fail(fmt.Errorf("reading the existing data secret %s: %w", klog.KObj(want), err))
		}
	}
	if why := cannotTake(existing, s.cfg); why != "" {
		r.refusef(s, bootstrapv1.KubeadmConfigDataSecretConflictReason, "Secret %s already exists and %s; it is not overwritten", klog.KObj(existing), why)
		return halt(ctrl.Result{})
	}
	existing.Labels = mergeMaps(existing.Labels, want.Labels)
	existing.Annotations = mergeMaps(existing.Annotations, want.Annotations)
	if out.token == nil {
		for _, k := range tokenAnnotationKeys {
			delete(existing.Annotations, k)
		}
	}
	existing.OwnerReferences = util.EnsureOwnerRef(dropControllers(existing.OwnerReferences), want.OwnerReferences[0])
	existing.Data = want.Data
	if err := r.Client.Update(ctx, existing); err != nil {
		return fail(fmt.Errorf("updating the data secret %s: %w", klog.KObj(existing), err))
	}
	return outcome{}
}

// cannotTake says why an existing Secret is not the config's data secret to
// write, or "" when it is: of Cluster API's secret type, and controlled by a
// KubeadmConfig of the config's name (itself, or itself before a move gave
// it a new UID), or by nothing and named after the config or one of its
// revisions (as after a restore that dropped owner references, which
// upstream adopts too). A
// Secret of another name that a Machine or MachinePool points at is never
// taken: anyone who may write those could otherwise hand the config, say,
// a Cluster's kubeconfig to overwrite or to have garbage-collected with it.
func cannotTake(sec *corev1.Secret, cfg *bootstrapv1.KubeadmConfig) string {
	if sec.Type != clusterv1.ClusterSecretType {
		return fmt.Sprintf("has type %q, not %q", sec.Type, clusterv1.ClusterSecretType)
	}
	c := metav1.GetControllerOf(sec)
	switch {
	case c == nil && (sec.Name == cfg.Name || isRevisionOf(sec.Name, cfg.Name)):
		return ""
	case c == nil:
		return "is neither named after this KubeadmConfig nor controlled by it"
	case c.Kind == "KubeadmConfig" && c.Name == cfg.Name && groupOf(c.APIVersion) == bootstrapv1.GroupVersion.Group:
		return ""
	}
	return fmt.Sprintf("is controlled by %s %s", c.Kind, c.Name)
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

func dropControllers(refs []metav1.OwnerReference) []metav1.OwnerReference {
	out := refs[:0:0]
	for _, ref := range refs {
		if !ptr.Deref(ref.Controller, false) {
			out = append(out, ref)
		}
	}
	return out
}

func mergeMaps(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// reconcileCreated looks after a config whose data secret exists: its owner
// reference, a MachinePool's changed spec, and the bootstrap token it carries.
func (r *Reconciler) reconcileCreated(ctx context.Context, s *scope) outcome {
	s.dataAvailable()
	s.certificatesAvailable()
	if s.cfg.Status.DataSecretName == "" {
		s.cfg.Status.DataSecretName = s.cfg.Name
	}
	key := client.ObjectKey{Namespace: s.cfg.Namespace, Name: s.cfg.Status.DataSecretName}
	sec := &corev1.Secret{}
	err := r.CachingClient.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) {
		// The cache may not have seen a secret this controller just wrote.
		err = r.APIReader.Get(ctx, key, sec)
	}
	switch {
	case apierrors.IsNotFound(err):
		return r.dataSecretGone(ctx, s, key)
	case err != nil:
		return fail(fmt.Errorf("reading the data secret %s: %w", key, err))
	}
	if o := r.ensureControllerRef(ctx, s, sec); o.stops() {
		return o
	}
	if err := r.moveLegacyToken(ctx, s, sec); err != nil {
		return fail(err)
	}
	if o := r.rebaseGeneration(ctx, s, sec); o.stops() {
		return o
	}
	if poolSpecChanged(s, sec) {
		var keep *bootstraptoken.Token
		if tok, ok := s.specToken(); ok && r.vouched(s, sec, tok) {
			keep = &tok
		}
		if o := r.renderAgain(ctx, s, sec, keep); o.stops() {
			if !o.halted {
				return o
			}
			// The changed spec cannot be rendered (its condition says
			// why): the pool's instances keep booting from the data that
			// exists, so the token it carries stays valid meanwhile.
			s.renderHalted = true
			return o.with(r.reconcileToken(ctx, s, sec))
		}
	}
	if err := r.prunePrevious(ctx, s, sec); err != nil {
		return fail(err)
	}
	return r.reconcileToken(ctx, s, sec)
}

// poolSpecChanged reports whether a MachinePool's config changed since its
// data secret was rendered. Secrets without the generation (written before
// it was recorded, or by upstream's provider) count as current: rendering
// every pool again on upgrade would change data nobody asked to change.
func poolSpecChanged(s *scope, sec *corev1.Secret) bool {
	recorded, ok := sec.Annotations[bootstrapv1.ConfigGenerationAnnotation]
	return s.owner.pool != nil && ok && recorded != strconv.FormatInt(s.cfg.Generation, 10)
}

// rebaseGeneration records a pool config's generation and UID on its data
// secret when the secret counts the generation of another UID (or of none,
// as written before the UID was recorded): clusterctl move and restores
// create the config anew, its generation starting again, and that is no
// spec change (the pool would roll for a move).
func (r *Reconciler) rebaseGeneration(ctx context.Context, s *scope, sec *corev1.Secret) outcome {
	_, counted := sec.Annotations[bootstrapv1.ConfigGenerationAnnotation]
	if s.owner.pool == nil || !counted || sec.Annotations[bootstrapv1.ConfigUIDAnnotation] == string(s.cfg.UID) {
		return outcome{}
	}
	orig := sec.DeepCopy()
	sec.Annotations = mergeMaps(sec.Annotations, generationAnnotations(s.cfg))
	if err := r.Client.Patch(ctx, sec, client.MergeFrom(orig)); err != nil {
		return fail(fmt.Errorf("recording the config's generation on the data secret %s: %w", klog.KObj(sec), err))
	}
	return outcome{}
}

// renderAgain renders a MachinePool's changed config for the pool's next
// instances, with the token in its spec, into a new revision when what they
// get changed (and in place when it did not); tok, when not nil, is that
// token and a provider's, named on the secret as looked after.
func (r *Reconciler) renderAgain(ctx context.Context, s *scope, sec *corev1.Secret, tok *bootstraptoken.Token) outcome {
	out, o := r.render(ctx, s, plan.ActionJoin)
	if o.stops() {
		return o
	}
	out.token = tok
	if out.name != sec.Name {
		if o := r.newRevision(ctx, s, sec, out); o.stops() {
			return o
		}
		s.dataAvailable()
		ctrl.LoggerFrom(ctx).Info("Rendered the MachinePool's data into a new revision", "generation", s.cfg.Generation, "format", out.data.Format, "Secret", out.name)
		r.Recorder.Eventf(s.cfg, s.owner.object(), corev1.EventTypeNormal, bootstrapv1.BootstrapDataUpdatedEvent, "Bootstrap",
			"Rendered the data of %s (%s) into the new data secret %s: its KubeadmConfig changed (generation %d), so the pool's instances roll", s.owner, out.data.Format, out.name, s.cfg.Generation)
		return outcome{}
	}
	existing := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sec), existing); err != nil {
		return fail(fmt.Errorf("reading the data secret to render it again: %w", err))
	}
	if o := r.putDataSecret(ctx, s, out, existing); o.stops() {
		return o
	}
	sec.Annotations = existing.Annotations
	s.dataAvailable()
	ctrl.LoggerFrom(ctx).Info("Rendered the MachinePool's data again", "generation", s.cfg.Generation, "format", out.data.Format)
	r.Recorder.Eventf(s.cfg, s.owner.object(), corev1.EventTypeNormal, bootstrapv1.BootstrapDataUpdatedEvent, "Bootstrap",
		"Rendered the data of %s again (%s): its KubeadmConfig changed (generation %d), what its instances get did not", s.owner, out.data.Format, s.cfg.Generation)
	return outcome{}
}

// dataSecretGone handles a data secret deleted behind the controller's back:
// a machine that has not joined yet gets its data written again; for a joined
// one (its nodeRef, or its Node in the workload cluster while a move or a
// restore left it without one) the event says what happened.
func (r *Reconciler) dataSecretGone(ctx context.Context, s *scope, key client.ObjectKey) outcome {
	joined := s.owner.joined() || key.Name != s.cfg.Name && !(s.owner.pool != nil && isRevisionOf(key.Name, s.cfg.Name))
	if !joined {
		var o outcome
		if joined, o = r.joinedInWorkload(ctx, s); o.stops() {
			return o
		}
	}
	if joined {
		// Used already: the data was available and did its job, as upstream's
		// provider reports it too (operators delete bootstrap secrets after
		// boot; a False here would make healthy Machines unavailable).
		if !r.checks.seenGone(client.ObjectKeyFromObject(s.cfg)) {
			r.Recorder.Eventf(s.cfg, nil, corev1.EventTypeNormal, bootstrapv1.DataSecretMissingEvent, "Bootstrap",
				"The data secret %s was deleted after %s used it; nothing to do", key, s.owner)
		}
		return outcome{}
	}
	r.Recorder.Eventf(s.cfg, nil, corev1.EventTypeWarning, bootstrapv1.DataSecretMissingEvent, "Bootstrap", "The data secret %s was deleted before %s joined; writing it again", key, s.owner)
	return r.reconcileData(ctx, s)
}

// ensureControllerRef gives an existing data secret this config as its
// controller when it has none (a restore, as upstream does), names it by an
// older UID (clusterctl move or a restore gave the config a new one: garbage
// collection would otherwise delete the secret as an orphan) or by an older
// API version.
func (r *Reconciler) ensureControllerRef(ctx context.Context, s *scope, sec *corev1.Secret) outcome {
	ref := *metav1.NewControllerRef(s.cfg, bootstrapv1.GroupVersion.WithKind("KubeadmConfig"))
	if c := metav1.GetControllerOf(sec); c != nil && c.UID == s.cfg.UID && c.Kind == ref.Kind && c.APIVersion == ref.APIVersion {
		// Controlled by this very config (as upstream's provider writes it,
		// too): nothing to repair. A reference by an older API version is
		// rewritten, as upstream's provider does: garbage collection and
		// clusterctl's object graph read it by the served version.
		return outcome{}
	}
	if why := cannotTake(sec, s.cfg); why != "" {
		s.dataNotAvailablef(bootstrapv1.KubeadmConfigDataSecretConflictReason, "Secret %s %s", klog.KObj(sec), why)
		return halt(ctrl.Result{})
	}
	orig := sec.DeepCopy()
	sec.OwnerReferences = util.EnsureOwnerRef(dropControllers(sec.OwnerReferences), ref)
	if err := r.Client.Patch(ctx, sec, client.MergeFrom(orig)); err != nil {
		return fail(fmt.Errorf("setting the owner of the data secret %s: %w", klog.KObj(sec), err))
	}
	return outcome{}
}
