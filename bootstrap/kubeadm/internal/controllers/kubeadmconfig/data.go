package kubeadmconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstrapdata"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
)

const (
	// TokenIDAnnotation on a data secret names the bootstrap token (its public
	// ID) that this provider created for the machine and still manages.
	TokenIDAnnotation = "bootstrap.cluster.x-k8s.io/bootstrap-token-id"
	// TokenKey in a data secret holds that token, so that it can be re-created
	// identically if the workload cluster's token cleaner removed it before the
	// machine joined (the machine already has it in its data).
	TokenKey = "bootstrap-token"
	// ConfigGenerationAnnotation on a data secret is the generation of the
	// KubeadmConfig it was rendered from: a MachinePool's data is rendered
	// again when its config's spec changes (ClusterClass patches a pool's
	// config in place), so that the pool's next instances get the change.
	ConfigGenerationAnnotation = "bootstrap.cluster.x-k8s.io/config-generation"
)

// Event reasons.
const (
	EventInitData       = "ControlPlaneInitData"
	EventTokenRecreated = "BootstrapTokenRecreated"
	EventTokenRotated   = "BootstrapTokenRotated"
	EventDataUpdated    = "BootstrapDataUpdated"
	EventDataSecretGone = ReasonDataSecretMissing
)

// reconcileData produces the data secret of a config that has none.
func (r *Reconciler) reconcileData(ctx context.Context, s *scope) (ctrl.Result, error) {
	if written, err := r.writtenBefore(ctx, s); err != nil || written {
		// Look after its token on the next round.
		return ctrl.Result{RequeueAfter: cacheLag}, err
	}
	if !ptr.Deref(s.cluster.Status.Initialization.InfrastructureProvisioned, false) {
		s.dataNotAvailable(ReasonWaitingForInfrastructure, "Waiting for the infrastructure of Cluster %s to be provisioned", s.cluster.Name)
		return ctrl.Result{}, nil
	}
	action, err := r.action(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	out, err := r.render(ctx, s, action, tokenChoice{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.putDataSecret(ctx, s, out, nil); err != nil {
		return ctrl.Result{}, err
	}
	s.cfg.Status.DataSecretName = s.cfg.Name
	s.cfg.Status.Initialization.DataSecretCreated = ptr.To(true)
	s.dataAvailable()
	ctrl.LoggerFrom(ctx).Info("Created the bootstrap data secret", "action", action, "format", out.data.Format)
	if action == plan.ActionInit {
		r.Recorder.Eventf(s.cfg, s.owner.object(), corev1.EventTypeNormal, EventInitData, "Bootstrap",
			"%s initializes the control plane of Cluster %s", s.owner, s.cluster.Name)
	}
	if out.token == nil {
		return ctrl.Result{}, nil
	}
	return r.scheduleTokenCheck(s, out.token.ID, out.expires), nil
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

// rendered is bootstrap data with the token this provider made for it, if any.
type rendered struct {
	data    *bootstrapdata.Data
	token   *bootstraptoken.Token
	expires time.Time
}

// tokenChoice is the bootstrap token rendered data carries where the join
// needs one: kept as it is, or a new one replacing another ("" for the
// first).
type tokenChoice struct {
	replaces string
	kept     *bootstraptoken.Token
}

// render gathers the inputs, gets a bootstrap token where the join needs one,
// and renders the format.
func (r *Reconciler) render(ctx context.Context, s *scope, action plan.Action, choice tokenChoice) (*rendered, error) {
	in, err := r.gatherInputs(ctx, s, action)
	if err != nil {
		return nil, err
	}
	spec := &s.cfg.Spec
	out := &rendered{}
	if given := spec.JoinConfiguration.Discovery.BootstrapToken.Token; given != "" {
		s.addSensitive(given)
	} else if action != plan.ActionInit && usesTokenDiscovery(spec) && choice.kept != nil {
		s.addSensitive(choice.kept.Value(), choice.kept.Secret)
		in.BootstrapToken = choice.kept.Value()
		out.token = choice.kept
	} else if action != plan.ActionInit && usesTokenDiscovery(spec) {
		m, err := r.tokens(ctx, s)
		if err != nil {
			if errors.Is(err, clustercache.ErrClusterNotConnected) {
				s.dataNotAvailable(ReasonWorkloadClusterUnreachable, "Waiting to reach the API server of Cluster %s to create a bootstrap token", s.cluster.Name)
				return nil, stop(ctrl.Result{RequeueAfter: unreachableRetry})
			}
			return nil, err
		}
		tok, expires, err := m.Create(ctx, s.tokenOwner(), choice.replaces)
		if err != nil {
			s.dataNotAvailable(ReasonBootstrapTokenFailed, "Creating a bootstrap token in Cluster %s failed; retrying: %v", s.cluster.Name, err)
			return nil, err
		}
		s.addSensitive(tok.Value(), tok.Secret)
		in.BootstrapToken = tok.Value()
		out.token, out.expires = &tok, expires
	}

	p, err := plan.Build(*in)
	if err != nil {
		var te *plan.TemplateError
		var ve *plan.VersionError
		reason := ReasonInvalidConfiguration
		switch {
		case errors.As(err, &te):
			reason = ReasonTemplateFailed
		case errors.As(err, &ve):
			reason = ReasonInvalidKubernetesVersion
		}
		r.refuse(s, reason, "%v", err)
		return nil, stop(ctrl.Result{})
	}
	if out.data, err = bootstrapdata.Render(p); err != nil {
		r.refuse(s, ReasonRenderFailed, "The %s renderer refused the configuration: %v", p.Format, err)
		return nil, stop(ctrl.Result{})
	}
	r.checkSize(s, out.data)
	return out, nil
}

// checkSize reports data larger than --bootstrap-data-size-limit. The secret
// is written anyway: whether the infrastructure takes it is its decision, and
// the condition and event say why a machine may not get it.
func (r *Reconciler) checkSize(s *scope, d *bootstrapdata.Data) {
	if r.DataSizeLimit <= 0 {
		s.deleteCondition(ConditionDataSizeWithinLimit)
		return
	}
	size := d.Size()
	if size <= r.DataSizeLimit {
		s.setCondition(ConditionDataSizeWithinLimit, metav1.ConditionTrue, ReasonDataSizeWithinLimit, "")
		return
	}
	hint := "set spec.gzipUserData: true to compress it, or move content out of the spec (files from secrets the machine fetches)"
	if ptr.Deref(s.cfg.Spec.GzipUserData, false) || d.Format == bootstrapv1.Raw {
		hint = "move content out of the spec (files from secrets the machine fetches)"
	}
	r.warn(s, ConditionDataSizeWithinLimit, ReasonDataTooLarge,
		"The %s bootstrap data is %d bytes, over the limit of %d bytes (--bootstrap-data-size-limit); the infrastructure may refuse it: %s",
		d.Format, size, r.DataSizeLimit, hint)
}

// refuse reports why there is no data when only a person can fix it (the
// spec, what it refers to, the manager's flags), with a warning event when the
// config enters that state.
func (r *Reconciler) refuse(s *scope, reason, format string, args ...any) {
	r.warn(s, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition, reason, format, args...)
}

func (r *Reconciler) warn(s *scope, conditionType, reason, format string, args ...any) {
	// The reason is copied: Get points into the conditions that Set rewrites.
	prevReason := ""
	if prev := conditions.Get(s.cfg, conditionType); prev != nil {
		prevReason = prev.Reason
	}
	s.setCondition(conditionType, metav1.ConditionFalse, reason, format, args...)
	if prevReason != reason {
		r.Recorder.Eventf(s.cfg, nil, corev1.EventTypeWarning, reason, "Bootstrap", "%s", conditions.Get(s.cfg, conditionType).Message)
	}
}

func (s *scope) tokenOwner() bootstraptoken.Owner {
	return bootstraptoken.Owner{UID: s.cfg.UID, Namespace: s.cfg.Namespace, Name: s.cfg.Name}
}

// tokens reaches the workload cluster's bootstrap tokens, uncached.
func (r *Reconciler) tokens(ctx context.Context, s *scope) (*bootstraptoken.Manager, error) {
	c, err := r.ClusterCache.GetUncachedClient(ctx, util.ObjectKey(s.cluster))
	if err != nil {
		return nil, err
	}
	return &bootstraptoken.Manager{Client: c, TTL: r.TokenTTL}, nil
}

// desiredDataSecret is the data secret for out: named after the config,
// controlled by it, labelled with the cluster, of Cluster API's secret type.
func desiredDataSecret(s *scope, out *rendered) *corev1.Secret {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            s.cfg.Name,
			Namespace:       s.cfg.Namespace,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s.cfg, bootstrapv1.GroupVersion.WithKind("KubeadmConfig"))},
		},
		Type: clusterv1.ClusterSecretType,
		Data: out.data.SecretData(),
	}
	sec.Annotations = map[string]string{ConfigGenerationAnnotation: strconv.FormatInt(s.cfg.Generation, 10)}
	if out.token != nil {
		sec.Annotations[TokenIDAnnotation] = out.token.ID
		sec.Data[TokenKey] = []byte(out.token.Value())
	}
	return sec
}

// putDataSecret writes out to the config's data secret: created, or, when a
// Secret of that name exists (an interrupted earlier attempt, a restore, a
// rotation), updated if it is this config's to take. A Secret that belongs to
// someone else is never overwritten.
func (r *Reconciler) putDataSecret(ctx context.Context, s *scope, out *rendered, existing *corev1.Secret) error {
	want := desiredDataSecret(s, out)
	if existing == nil {
		err := r.Client.Create(ctx, want)
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the data secret %s: %w", klog.KObj(want), err)
		}
		existing = &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), existing); err != nil {
			return fmt.Errorf("reading the existing data secret %s: %w", klog.KObj(want), err)
		}
	}
	if why := cannotTake(existing, s.cfg); why != "" {
		r.refuse(s, ReasonDataSecretConflict, "Secret %s already exists and %s; it is not overwritten", klog.KObj(existing), why)
		return stop(ctrl.Result{})
	}
	existing.Labels = mergeMaps(existing.Labels, want.Labels)
	existing.Annotations = mergeMaps(existing.Annotations, want.Annotations)
	if out.token == nil {
		delete(existing.Annotations, TokenIDAnnotation)
	}
	existing.OwnerReferences = util.EnsureOwnerRef(dropControllers(existing.OwnerReferences), want.OwnerReferences[0])
	existing.Data = want.Data
	if err := r.Client.Update(ctx, existing); err != nil {
		return fmt.Errorf("updating the data secret %s: %w", klog.KObj(existing), err)
	}
	return nil
}

// cannotTake says why an existing Secret named like the config is not the
// config's data secret to write, or "" when it is: of Cluster API's secret
// type, and controlled by a KubeadmConfig of that name or by nothing (as
// after a restore that dropped owner references, which upstream adopts too).
func cannotTake(sec *corev1.Secret, cfg *bootstrapv1.KubeadmConfig) string {
	if sec.Type != clusterv1.ClusterSecretType {
		return fmt.Sprintf("has type %q, not %q", sec.Type, clusterv1.ClusterSecretType)
	}
	c := metav1.GetControllerOf(sec)
	if c == nil || (c.Kind == "KubeadmConfig" && c.Name == cfg.Name && groupOf(c.APIVersion) == bootstrapv1.GroupVersion.Group) {
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
// reference, and the bootstrap token it carries.
func (r *Reconciler) reconcileCreated(ctx context.Context, s *scope) (ctrl.Result, error) {
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
		return ctrl.Result{}, fmt.Errorf("reading the data secret %s: %w", key, err)
	}
	if err := r.ensureControllerRef(ctx, s, sec); err != nil {
		return ctrl.Result{}, err
	}
	id := sec.Annotations[TokenIDAnnotation]
	if poolSpecChanged(s, sec) {
		if err := r.renderAgain(ctx, s, sec, id); err != nil {
			return ctrl.Result{}, err
		}
	}
	if id == "" {
		return ctrl.Result{}, nil
	}
	return r.maintainToken(ctx, s, sec, id)
}

// poolSpecChanged reports whether a MachinePool's config changed since its
// data secret was rendered. Secrets without the generation (written before
// it was recorded) count as current: rendering every pool again on upgrade
// would change data nobody asked to change.
func poolSpecChanged(s *scope, sec *corev1.Secret) bool {
	recorded, ok := sec.Annotations[ConfigGenerationAnnotation]
	return s.owner.pool != nil && ok && recorded != strconv.FormatInt(s.cfg.Generation, 10)
}

// renderAgain renders a MachinePool's changed config into its data secret for
// the pool's next instances, with the token the secret carries (id, if it
// carries one this provider manages): instances still joining with it keep
// a token that is looked after.
func (r *Reconciler) renderAgain(ctx context.Context, s *scope, sec *corev1.Secret, id string) error {
	var choice tokenChoice
	if id != "" {
		tok, err := r.recordedToken(ctx, sec)
		if err != nil {
			return err
		}
		choice.kept = &tok
	}
	out, err := r.render(ctx, s, plan.ActionJoin, choice)
	if err != nil {
		return err
	}
	existing := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sec), existing); err != nil {
		return fmt.Errorf("reading the data secret to render it again: %w", err)
	}
	if err := r.putDataSecret(ctx, s, out, existing); err != nil {
		return err
	}
	s.dataAvailable()
	ctrl.LoggerFrom(ctx).Info("Rendered the MachinePool's data again: its KubeadmConfig changed", "generation", s.cfg.Generation, "format", out.data.Format)
	r.Recorder.Eventf(s.cfg, s.owner.object(), corev1.EventTypeNormal, EventDataUpdated, "Bootstrap",
		"Rendered the data of %s again (%s) for its next instances: the KubeadmConfig changed (generation %d)", s.owner, out.data.Format, s.cfg.Generation)
	return nil
}

// dataSecretGone handles a data secret deleted behind the controller's back:
// a machine that has not joined yet gets its data written again; for a joined
// one the condition says what happened.
func (r *Reconciler) dataSecretGone(ctx context.Context, s *scope, key client.ObjectKey) (ctrl.Result, error) {
	if s.owner.joined() || key.Name != s.cfg.Name {
		s.dataNotAvailable(ReasonDataSecretMissing, "The data secret %s was deleted; the machine has already used it", key)
		return ctrl.Result{}, nil
	}
	r.Recorder.Eventf(s.cfg, nil, corev1.EventTypeWarning, EventDataSecretGone, "Bootstrap", "The data secret %s was deleted before %s joined; writing it again", key, s.owner)
	return r.reconcileData(ctx, s)
}

// ensureControllerRef gives an existing data secret this config as its
// controller when it has none (a restore), as upstream does.
func (r *Reconciler) ensureControllerRef(ctx context.Context, s *scope, sec *corev1.Secret) error {
	ref := *metav1.NewControllerRef(s.cfg, bootstrapv1.GroupVersion.WithKind("KubeadmConfig"))
	if util.HasExactOwnerRef(sec.OwnerReferences, ref) {
		return nil
	}
	if why := cannotTake(sec, s.cfg); why != "" {
		s.dataNotAvailable(ReasonDataSecretConflict, "Secret %s %s", klog.KObj(sec), why)
		return stop(ctrl.Result{})
	}
	orig := sec.DeepCopy()
	sec.OwnerReferences = util.EnsureOwnerRef(dropControllers(sec.OwnerReferences), ref)
	if err := r.Client.Patch(ctx, sec, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("setting the owner of the data secret %s: %w", klog.KObj(sec), err)
	}
	return nil
}

// maintainToken keeps the token of a machine that has not joined valid, deletes
// it once the machine's Node exists, and rotates a MachinePool's token when the
// pool is settled and the token has run half its TTL.
func (r *Reconciler) maintainToken(ctx context.Context, s *scope, sec *corev1.Secret, id string) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("bootstrapToken", id)
	key := client.ObjectKeyFromObject(s.cfg)
	if !s.owner.joined() {
		if wait := r.checks.due(key, id, r.clock().Now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	m, err := r.tokens(ctx, s)
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		log.V(2).Info("Cannot reach the workload cluster to look after the bootstrap token; retrying")
		return ctrl.Result{RequeueAfter: unreachableRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	if s.owner.joined() {
		if err := m.Delete(ctx, s.tokenOwner(), id); err != nil && !errors.Is(err, bootstraptoken.ErrNotOwned) {
			return ctrl.Result{}, err
		}
		if err := r.releaseToken(ctx, sec); err != nil {
			return ctrl.Result{}, err
		}
		r.checks.forget(key)
		log.V(2).Info("Deleted the bootstrap token: the Machine's Node has joined")
		return ctrl.Result{}, nil
	}

	expires, did, err := m.Keep(ctx, s.tokenOwner(), id, func(ctx context.Context) (bootstraptoken.Token, error) {
		return r.recordedToken(ctx, sec)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	switch did {
	case bootstraptoken.Recreated:
		r.Recorder.Eventf(s.cfg, nil, corev1.EventTypeNormal, EventTokenRecreated, "Bootstrap",
			"Bootstrap token %s was gone from Cluster %s before %s joined; re-created it", id, s.cluster.Name, s.owner)
	case bootstraptoken.Repaired:
		r.Recorder.Eventf(s.cfg, nil, corev1.EventTypeWarning, EventTokenRecreated, "Bootstrap",
			"Bootstrap token %s in Cluster %s had lost its ID, secret or usage before %s joined; wrote it again", id, s.cluster.Name, s.owner)
	case bootstraptoken.Extended:
		log.V(2).Info("Extended the bootstrap token", "expires", expires)
	}
	if s.owner.pool != nil && did != bootstraptoken.Unchanged && !s.owner.hasPendingInstances() {
		return r.rotate(ctx, s, id)
	}
	return r.scheduleTokenCheck(s, id, expires), nil
}

// rotate gives a settled MachinePool a new token and data for its next
// instances. The old token was just extended, so an instance that picked it up
// a moment ago still has a full TTL to join.
func (r *Reconciler) rotate(ctx context.Context, s *scope, oldID string) (ctrl.Result, error) {
	out, err := r.render(ctx, s, plan.ActionJoin, tokenChoice{replaces: oldID})
	if err != nil {
		return ctrl.Result{}, err
	}
	existing := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: s.cfg.Status.DataSecretName}, existing); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the data secret to rotate its token: %w", err)
	}
	if err := r.putDataSecret(ctx, s, out, existing); err != nil {
		return ctrl.Result{}, err
	}
	s.dataAvailable()
	r.Recorder.Eventf(s.cfg, s.owner.object(), corev1.EventTypeNormal, EventTokenRotated, "Bootstrap",
		"Replaced bootstrap token %s with %s for new instances of %s", oldID, out.token.ID, s.owner)
	return r.scheduleTokenCheck(s, out.token.ID, out.expires), nil
}

func (r *Reconciler) scheduleTokenCheck(s *scope, id string, expires time.Time) ctrl.Result {
	next := (&bootstraptoken.Manager{TTL: r.TokenTTL}).NextCheck(expires)
	r.checks.set(client.ObjectKeyFromObject(s.cfg), id, next)
	return ctrl.Result{RequeueAfter: max(next.Sub(r.clock().Now()), time.Second)}
}

// recordedToken reads the token a data secret carries (live: the cache keeps
// no data of data secrets).
func (r *Reconciler) recordedToken(ctx context.Context, sec *corev1.Secret) (bootstraptoken.Token, error) {
	live := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sec), live); err != nil {
		return bootstraptoken.Token{}, fmt.Errorf("reading the token recorded in %s: %w", klog.KObj(sec), err)
	}
	tok, err := bootstraptoken.Parse(string(live.Data[TokenKey]))
	if err != nil {
		return bootstraptoken.Token{}, fmt.Errorf("the token recorded in %s: %w", klog.KObj(sec), err)
	}
	return tok, nil
}

// releaseToken drops the token from a data secret once it is deleted, so that
// later reconciles have nothing left to do.
func (r *Reconciler) releaseToken(ctx context.Context, sec *corev1.Secret) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{TokenIDAnnotation: nil}},
		"data":     map[string]any{TokenKey: nil},
	})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, sec, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the used token from %s: %w", klog.KObj(sec), err)
	}
	return nil
}
