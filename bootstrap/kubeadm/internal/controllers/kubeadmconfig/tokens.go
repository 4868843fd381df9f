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
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
)

func (s *scope) tokenOwner() bootstraptoken.Owner {
	return bootstraptoken.Owner{UID: s.cfg.UID, Namespace: s.cfg.Namespace, Name: s.cfg.Name}
}

// specToken is the token in the config's spec, if any and well formed; it is
// added to what no message may carry.
func (s *scope) specToken() (bootstraptoken.Token, bool) {
	given := s.cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token
	if given == "" {
		return bootstraptoken.Token{}, false
	}
	s.addSensitive(given)
	tok, err := bootstraptoken.Parse(given)
	if err != nil {
		return bootstraptoken.Token{}, false
	}
	s.addSensitive(tok.Secret)
	return tok, true
}

// tokens reaches the workload cluster's bootstrap tokens, uncached. A cluster
// that cannot be reached yet stops the reconcile with a condition saying so.
func (r *Reconciler) tokens(ctx context.Context, s *scope) (*bootstraptoken.Manager, outcome) {
	c, err := r.ClusterCache.GetUncachedClient(ctx, util.ObjectKey(s.cluster))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		s.dataNotAvailablef(bootstrapv1.KubeadmConfigWorkloadClusterUnreachableReason, "Waiting to reach the API server of Cluster %s to look after its bootstrap token", s.cluster.Name)
		return nil, halt(ctrl.Result{RequeueAfter: unreachableRetry})
	}
	if err != nil {
		return nil, fail(err)
	}
	return &bootstraptoken.Manager{Client: c, TTL: r.TokenTTL, Now: r.clock().Now}, outcome{}
}

// joinToken makes sure a joining machine's config has its token in the spec
// before anything is rendered from it, and says whether that token is a
// provider's to look after (nil: none is needed, or a person set it).
func (r *Reconciler) joinToken(ctx context.Context, s *scope, action plan.Action) (*bootstraptoken.Token, time.Time, outcome) {
	if action == plan.ActionInit || !usesTokenDiscovery(&s.cfg.Spec) {
		return nil, time.Time{}, outcome{}
	}
	tok, given := s.specToken()
	if !given && s.cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token != "" {
		return nil, time.Time{}, outcome{} // malformed: kubeadm and the renderers say so
	}
	m, o := r.tokens(ctx, s)
	if o.stops() {
		return nil, time.Time{}, o
	}
	previous := ""
	if given {
		found, err := m.Find(ctx, tok)
		switch {
		case err != nil:
			return nil, time.Time{}, fail(err)
		case found == bootstraptoken.MadeByProvider:
			expires, _, err := m.Keep(ctx, s.tokenOwner(), tok)
			if err != nil {
				return nil, time.Time{}, fail(err)
			}
			return &tok, expires, outcome{}
		case found == bootstraptoken.Absent && s.owner.pool != nil:
			previous = tok.ID // gone: the pool gets a new one, as upstream's provider gives it
		case found == bootstraptoken.Absent && s.choseSpecToken(tok):
			// This config's own, expired before its data was written (a
			// move or a restore may have given the config a new UID since):
			// a new one (a fresh secret, whatever the spec says).
		default:
			return nil, time.Time{}, outcome{} // a person's token
		}
	}
	tok, expires, err := m.Create(ctx, s.tokenOwner(), previous)
	if err != nil {
		s.dataNotAvailablef(bootstrapv1.KubeadmConfigBootstrapTokenFailedReason, "Creating a bootstrap token in Cluster %s failed; retrying: %v", s.cluster.Name, err)
		return nil, time.Time{}, fail(err)
	}
	s.addSensitive(tok.Value(), tok.Secret)
	if err := r.setSpecToken(ctx, s, tok); err != nil {
		return nil, time.Time{}, fail(err)
	}
	return &tok, expires, outcome{}
}

// choseSpecToken reports whether a provider put tok into the config's spec:
// its ID is derived from this config's UID, or the config's annotation
// records its hash (which a move or a restore keeps, unlike the UID).
func (s *scope) choseSpecToken(tok bootstraptoken.Token) bool {
	return bootstraptoken.Derived(s.cfg.UID, "", tok.ID) || s.cfg.Annotations[bootstrapv1.BootstrapTokenHashAnnotation] == tok.Hash()
}

// setSpecToken records tok in the config's spec, where every provider reads
// it, and its hash in an annotation that says this provider chose it. The
// spec changes, so does the generation; the status patch that ends the
// reconcile carries on from the patched object.
func (r *Reconciler) setSpecToken(ctx context.Context, s *scope, tok bootstraptoken.Token) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{bootstrapv1.BootstrapTokenHashAnnotation: tok.Hash()}},
		"spec": map[string]any{"joinConfiguration": map[string]any{
			"discovery": map[string]any{"bootstrapToken": map[string]any{"token": tok.Value()}}}}})
	if err != nil {
		return err
	}
	status := s.cfg.Status.DeepCopy()
	if err := r.Client.Patch(ctx, s.cfg, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("recording %s in the spec of KubeadmConfig %s: %w", tok, klog.KObj(s.cfg), err)
	}
	// The response carries the stored status; this reconcile's status is
	// the one still to be written, and what it says is about the spec as
	// patched (the token is this controller's own change).
	s.cfg.Status = *status
	for i := range s.cfg.Status.Conditions {
		s.cfg.Status.Conditions[i].ObservedGeneration = s.cfg.Generation
	}
	return nil
}

// reconcileToken looks after the token of a config whose data secret sec
// exists.
func (r *Reconciler) reconcileToken(ctx context.Context, s *scope, sec *corev1.Secret) outcome {
	carried := sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]
	tok, given := s.specToken()
	if !given || (s.owner.joined() && carried != tok.ID) {
		return outcome{}
	}
	key := client.ObjectKeyFromObject(s.cfg)
	if r.checks.released(key, tok.ID) {
		return outcome{} // deleted once used, or not one to look after
	}
	if s.owner.doneReason() == "" {
		if wait := r.checks.due(key, tok.ID, r.clock().Now()); wait > 0 {
			return done(ctrl.Result{RequeueAfter: wait})
		}
	}
	m, o := r.tokens(ctx, s)
	if o.stops() {
		if o.halted && carried == tok.ID && !s.renderHalted {
			// The data exists: an unreachable cluster is no reason to say otherwise.
			s.dataAvailable()
		}
		return o
	}
	if !r.vouched(s, sec, tok) {
		// Not recorded with the data: what the workload cluster holds
		// decides, once per process.
		return r.vouchFor(ctx, s, m, sec, tok)
	}
	return r.maintainToken(ctx, s, m, sec, tok)
}

// vouched reports whether tok is known to be the token the data secret sec
// carries: the secret records its hash, or this process adopted it.
func (r *Reconciler) vouched(s *scope, sec *corev1.Secret, tok bootstraptoken.Token) bool {
	return sec.Annotations[bootstrapv1.BootstrapTokenHashAnnotation] == tok.Hash() || r.checks.isAdopted(client.ObjectKeyFromObject(s.cfg), tok)
}

// vouchFor decides about a spec token the data secret does not record:
// looked after if the workload cluster holds it as a provider's token (the
// data named another, as in a rotation interrupted between its two writes,
// or was written by upstream's provider); replaced if it is a MachinePool's
// and gone; else left alone.
func (r *Reconciler) vouchFor(ctx context.Context, s *scope, m *bootstraptoken.Manager, sec *corev1.Secret, tok bootstraptoken.Token) outcome {
	key := client.ObjectKeyFromObject(s.cfg)
	found, err := m.Find(ctx, tok)
	switch {
	case err != nil:
		return fail(err)
	case found == bootstraptoken.Absent && s.owner.pool != nil && !s.renderHalted:
		// Gone before anyone looked after it (the token cleaner, after a
		// swap or a restore): no instance can join with it any more.
		return r.rotate(ctx, s, m, tok)
	case found != bootstraptoken.MadeByProvider:
		r.checks.release(key, tok.ID)
		return outcome{}
	}
	carried := sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]
	switch {
	case s.owner.pool != nil && s.renderHalted && carried != tok.ID:
		// Data that cannot be rendered again for the spec's token: the
		// token it carries is not known to be a provider's.
		return outcome{}
	case s.owner.pool != nil && carried != "" && carried != tok.ID:
		// The spec's token is newer than the data (a rotation interrupted
		// between the two writes): the pool's next instances get it.
		if o := r.renderAgain(ctx, s, sec, &tok); o.stops() {
			return o
		}
	case s.owner.pool != nil:
		// Data written by upstream's provider or without the token's hash:
		// the token it carries is recorded (metadata only, the data is not
		// rewritten), so that a rotation interrupted later is seen and
		// finished.
		if err := r.adopt(ctx, s, sec, tok); err != nil {
			return fail(err)
		}
	case carried != tok.ID:
		r.reportAdopted(s, tok)
	}
	r.checks.adopted(key, tok)
	return r.maintainToken(ctx, s, m, sec, tok)
}

// adopt names a provider's token on a pool's data secret written by
// upstream's provider (which records none) or without its hash.
func (r *Reconciler) adopt(ctx context.Context, s *scope, sec *corev1.Secret, tok bootstraptoken.Token) error {
	orig := sec.DeepCopy()
	sec.Annotations = mergeMaps(sec.Annotations, tokenAnnotations(tok))
	if err := r.Client.Patch(ctx, sec, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("recording %s on the data secret %s: %w", tok, klog.KObj(sec), err)
	}
	if orig.Annotations[bootstrapv1.BootstrapTokenIDAnnotation] != tok.ID {
		r.reportAdopted(s, tok)
	}
	return nil
}

// reportAdopted records that this provider now looks after a token another
// provider made (once per token and process: vouchFor runs once).
func (r *Reconciler) reportAdopted(s *scope, tok bootstraptoken.Token) {
	r.Recorder.Eventf(s.cfg, s.owner.object(), corev1.EventTypeNormal, bootstrapv1.BootstrapTokenAdoptedEvent, "Bootstrap",
		"Looking after %s of %s, made by a Cluster API kubeadm bootstrap provider", tok, s.owner)
}

// moveLegacyToken gives the spec the token an earlier version of this
// provider kept in the data secret only (read live: the cache keeps no data
// of data secrets), as if it were made now.
func (r *Reconciler) moveLegacyToken(ctx context.Context, s *scope, sec *corev1.Secret) error {
	if sec.Annotations[bootstrapv1.BootstrapTokenIDAnnotation] == "" || s.cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token != "" {
		return nil
	}
	live := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sec), live); err != nil {
		return fmt.Errorf("reading the token recorded in %s: %w", klog.KObj(sec), err)
	}
	if len(live.Data[bootstrapv1.LegacyBootstrapTokenKey]) == 0 {
		return nil
	}
	tok, err := bootstraptoken.Parse(string(live.Data[bootstrapv1.LegacyBootstrapTokenKey]))
	if err != nil {
		return fmt.Errorf("the token recorded in %s: %w", klog.KObj(sec), err)
	}
	s.addSensitive(tok.Value(), tok.Secret)
	if err := r.setSpecToken(ctx, s, tok); err != nil {
		return err
	}
	// The data secret held the token itself: it vouches for it.
	orig := sec.DeepCopy()
	sec.Annotations = mergeMaps(sec.Annotations, tokenAnnotations(tok))
	if err := r.Client.Patch(ctx, sec, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("recording %s on the data secret %s: %w", tok, klog.KObj(sec), err)
	}
	return nil
}

// maintainToken keeps the token of a machine that has not joined valid,
// deletes it once the machine's Node exists or the owner is going away or
// failed, and rotates a MachinePool's token when the pool is settled and the
// token has run half its TTL. A Machine's token that is gone is made again
// only if the Machine has not joined (the workload cluster decides while
// its nodeRef is missing, as after a move or a restore): a used join token
// is never revived.
func (r *Reconciler) maintainToken(ctx context.Context, s *scope, m *bootstraptoken.Manager, sec *corev1.Secret, tok bootstraptoken.Token) outcome {
	key := client.ObjectKeyFromObject(s.cfg)
	if why := s.owner.doneReason(); why != "" {
		if err := m.Delete(ctx, s.tokenOwner(), tok); err != nil && !errors.Is(err, bootstraptoken.ErrNotOwned) {
			return fail(err)
		}
		r.checks.release(key, tok.ID)
		ctrl.LoggerFrom(ctx).V(2).Info("Deleted the bootstrap token", "bootstrapToken", tok.ID, "why", why)
		return outcome{}
	}
	expires, did, o := r.keepToken(ctx, s, m, tok)
	switch {
	case o.stops():
		return o
	case did == bootstraptoken.Gone:
		r.checks.release(key, tok.ID)
		return outcome{}
	case s.owner.pool != nil:
		return r.keepPoolTokens(ctx, s, m, sec, tok, expires, did)
	}
	return done(r.scheduleTokenCheck(s, tok.ID, expires))
}

// keepToken extends tok when due and makes it again when it is gone, unless
// its Machine joined (then it stays gone: Gone), and says so in events.
func (r *Reconciler) keepToken(ctx context.Context, s *scope, m *bootstraptoken.Manager, tok bootstraptoken.Token) (time.Time, bootstraptoken.KeepResult, outcome) {
	log := ctrl.LoggerFrom(ctx).WithValues("bootstrapToken", tok.ID)
	expires, did, err := m.Extend(ctx, s.tokenOwner(), tok)
	if err != nil {
		return time.Time{}, did, fail(err)
	}
	if did == bootstraptoken.Gone {
		joined, o := r.joinedInWorkload(ctx, s)
		if o.stops() {
			return time.Time{}, did, o
		}
		if joined {
			log.V(2).Info("Not re-creating the bootstrap token: the Machine's Node exists")
			return time.Time{}, did, outcome{}
		}
		if expires, did, err = m.Keep(ctx, s.tokenOwner(), tok); err != nil {
			return time.Time{}, did, fail(err)
		}
	}
	switch did {
	case bootstraptoken.Recreated:
		r.Recorder.Eventf(s.cfg, nil, corev1.EventTypeNormal, bootstrapv1.BootstrapTokenRecreatedEvent, "Bootstrap",
			"Bootstrap token %s was gone from Cluster %s before %s joined; re-created it", tok.ID, s.cluster.Name, s.owner)
	case bootstraptoken.Repaired:
		r.Recorder.Eventf(s.cfg, nil, corev1.EventTypeWarning, bootstrapv1.BootstrapTokenRecreatedEvent, "Bootstrap",
			"Bootstrap token %s in Cluster %s had lost its ID, secret or usage before %s joined; wrote it again", tok.ID, s.cluster.Name, s.owner)
	case bootstraptoken.Extended:
		log.V(2).Info("Extended the bootstrap token", "expires", expires)
	}
	return expires, did, outcome{}
}

// keepPoolTokens rotates a settled pool's token once it was extended (did),
// and keeps the token before the last rotation while instances still join.
func (r *Reconciler) keepPoolTokens(ctx context.Context, s *scope, m *bootstraptoken.Manager, sec *corev1.Secret, tok bootstraptoken.Token,
	expires time.Time, did bootstraptoken.KeepResult) outcome {
	_, hasPrevious := sec.Annotations[bootstrapv1.PreviousBootstrapTokenIDAnnotation]
	if did == bootstraptoken.Unchanged && !hasPrevious {
		return done(r.scheduleTokenCheck(s, tok.ID, expires))
	}
	settled, err := r.poolSettled(ctx, s)
	if err != nil {
		return fail(err)
	}
	if settled && did != bootstraptoken.Unchanged && !s.renderHalted {
		return r.rotate(ctx, s, m, tok)
	}
	previousExpires, err := r.keepPrevious(ctx, s, m, sec, settled)
	if err != nil {
		return fail(err)
	}
	if !previousExpires.IsZero() && previousExpires.Before(expires) {
		expires = previousExpires
	}
	return done(r.scheduleTokenCheck(s, tok.ID, expires))
}

// poolSettled reports whether every instance the pool wants is a Node, as
// the pool is on the API server now: an instance added since this reconcile
// read the pool boots with the data as it is, so its token must not be
// rotated away. The pool is read live once per reconcile, and only when
// the cached one looks settled.
func (r *Reconciler) poolSettled(ctx context.Context, s *scope) (bool, error) {
	if s.owner.hasPendingInstances() {
		return false, nil
	}
	if !s.poolReadLive {
		live := &clusterv1.MachinePool{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.owner.pool), live); err != nil {
			return false, fmt.Errorf("reading %s: %w", s.owner, err)
		}
		s.owner.pool, s.poolReadLive = live, true
	}
	return !s.owner.hasPendingInstances(), nil
}

// keepPrevious keeps valid the token a MachinePool's data carried before
// its last rotation while the pool has instances that have not joined (they
// may have been launched from that data), and forgets it once the pool is
// settled: it then expires on its own. It returns when that token expires,
// or the zero time when there is none to keep.
func (r *Reconciler) keepPrevious(ctx context.Context, s *scope, m *bootstraptoken.Manager, sec *corev1.Secret, settled bool) (time.Time, error) {
	id := sec.Annotations[bootstrapv1.PreviousBootstrapTokenIDAnnotation]
	switch {
	case id == "":
		return time.Time{}, nil
	case settled:
		return time.Time{}, r.forgetPrevious(ctx, sec)
	}
	prev, found, err := m.Lookup(ctx, id)
	if err != nil {
		return time.Time{}, err
	}
	if !found || prev.Hash() != sec.Annotations[bootstrapv1.PreviousBootstrapTokenHashAnnotation] {
		// Gone (it expired while no manager ran), or not the one recorded.
		return time.Time{}, r.forgetPrevious(ctx, sec)
	}
	s.addSensitive(prev.Value(), prev.Secret)
	expires, did, err := m.Extend(ctx, s.tokenOwner(), prev)
	if err != nil {
		return time.Time{}, err
	}
	if did == bootstraptoken.Extended {
		ctrl.LoggerFrom(ctx).V(2).Info("Extended the pool's previous bootstrap token: instances launched from its data have not joined", "bootstrapToken", id, "expires", expires)
	}
	return expires, nil
}

// forgetPrevious removes the record of the pool's previous token from its
// data secret.
func (r *Reconciler) forgetPrevious(ctx context.Context, sec *corev1.Secret) error {
	orig := sec.DeepCopy()
	delete(sec.Annotations, bootstrapv1.PreviousBootstrapTokenIDAnnotation)
	delete(sec.Annotations, bootstrapv1.PreviousBootstrapTokenHashAnnotation)
	if err := r.Client.Patch(ctx, sec, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("forgetting the previous token on the data secret %s: %w", klog.KObj(sec), err)
	}
	return nil
}

// rotate gives a settled MachinePool a new token and data for its next
// instances. The old token was just extended, so an instance that picked it up
// a moment ago still has a full TTL to join, and the data secret records it
// as the previous token, kept valid while instances have not joined. The
// spec is written first: an interruption before the data secret is
// rewritten is finished by the next reconcile (reconcileToken), by either
// provider.
func (r *Reconciler) rotate(ctx context.Context, s *scope, m *bootstraptoken.Manager, old bootstraptoken.Token) outcome {
	tok, expires, err := m.Create(ctx, s.tokenOwner(), old.ID)
	if err != nil {
		return fail(err)
	}
	s.addSensitive(tok.Value(), tok.Secret)
	if err := r.setSpecToken(ctx, s, tok); err != nil {
		return fail(err)
	}
	out, o := r.render(ctx, s, plan.ActionJoin)
	if o.stops() {
		return o
	}
	out.token, out.previous = &tok, &old
	existing := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: s.cfg.Status.DataSecretName}, existing); err != nil {
		return fail(fmt.Errorf("reading the data secret to rotate its token: %w", err))
	}
	if o := r.putDataSecret(ctx, s, out, existing); o.stops() {
		return o
	}
	s.dataAvailable()
	r.Recorder.Eventf(s.cfg, s.owner.object(), corev1.EventTypeNormal, bootstrapv1.BootstrapTokenRotatedEvent, "Bootstrap",
		"Replaced bootstrap token %s with %s for new instances of %s", old.ID, tok.ID, s.owner)
	return done(r.scheduleTokenCheck(s, tok.ID, expires))
}

func (r *Reconciler) scheduleTokenCheck(s *scope, id string, expires time.Time) ctrl.Result {
	next := (&bootstraptoken.Manager{TTL: r.TokenTTL}).NextCheck(expires)
	r.checks.set(client.ObjectKeyFromObject(s.cfg), id, next)
	return ctrl.Result{RequeueAfter: max(next.Sub(r.clock().Now()), time.Second)}
}
