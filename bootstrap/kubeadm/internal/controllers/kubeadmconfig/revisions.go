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

// A MachinePool's instances all boot from one data secret, which the
// controller writes again when the pool's token rotates and when its
// config's spec changes. Cluster API copies the config's
// status.dataSecretName into the MachinePool's spec on every reconcile, so
// an infrastructure provider that rolls on a change of that name (as
// cluster-api-provider-aws does) can tell the two apart only by the name:
// a pool's data secret is therefore named by revision, after its config and
// a digest of the data apart from its token. A rotation writes the current
// revision in place; a spec change writes a new one, then points the status
// at it.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
)

// revisionDigestLength is how many hex digits of the digest a revision's name
// carries: 40 bits, so that a pool's revisions do not collide by chance.
const revisionDigestLength = 10

// maxObjectName is the longest name Kubernetes takes for a Secret (a DNS subdomain).
const maxObjectName = 253

// revisionPrefix is the part of a revision's name before its digest: the
// config's name, cut short to leave room for the digest.
func revisionPrefix(cfgName string) string {
	if limit := maxObjectName - 1 - revisionDigestLength; len(cfgName) > limit {
		return strings.TrimRight(cfgName[:limit], ".-")
	}
	return cfgName
}

// revisionName is the name of a pool's data secret for plan p: its config's
// name and a digest of the plan with its token masked, so that the same spec
// gives the same name (after a move or a restore too) and a new token none.
// The config's whole name is digested too: two configs whose names are cut
// short alike still get different names.
func revisionName(cfgName string, p *plan.Plan, token string) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("digesting the bootstrap plan: %w", err)
	}
	if token != "" {
		b = bytes.ReplaceAll(b, []byte(token), []byte("<bootstrap token>"))
	}
	h := sha256.New()
	h.Write([]byte(cfgName))
	h.Write([]byte{0})
	h.Write(b)
	return revisionPrefix(cfgName) + "-" + hex.EncodeToString(h.Sum(nil))[:revisionDigestLength], nil
}

// isRevisionOf reports whether name has the shape of a revision of the
// config named cfgName.
func isRevisionOf(name, cfgName string) bool {
	digest, ok := strings.CutPrefix(name, revisionPrefix(cfgName)+"-")
	if !ok || len(digest) != revisionDigestLength {
		return false
	}
	for _, c := range digest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// newRevision writes a pool's data for its changed spec into a data secret
// of the new revision's name, before the status points at it: Cluster API
// then hands the name to the infrastructure, which rolls the pool. The
// current revision becomes the previous one, kept while instances may
// still boot from it; the one before it is used by no instance any more.
func (r *Reconciler) newRevision(ctx context.Context, s *scope, current *corev1.Secret, out *rendered) outcome {
	out.previousSecret = current.Name
	out.carried = map[string]string{}
	for _, k := range []string{bootstrapv1.PreviousBootstrapTokenIDAnnotation, bootstrapv1.PreviousBootstrapTokenHashAnnotation} {
		if v, ok := current.Annotations[k]; ok {
			out.carried[k] = v
		}
	}
	if o := r.putDataSecret(ctx, s, out, nil); o.stops() {
		return o
	}
	if older := current.Annotations[bootstrapv1.PreviousDataSecretAnnotation]; older != "" && older != out.name && older != current.Name {
		if err := r.deleteRevision(ctx, s, older); err != nil {
			return fail(err)
		}
	}
	s.cfg.Status.DataSecretName = out.name
	written := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: out.name}, written); err != nil {
		return fail(fmt.Errorf("reading the new data secret %s: %w", out.name, err))
	}
	*current = *written
	return outcome{}
}

// prunePrevious deletes a pool's previous revision once no instance can boot
// from it: the MachinePool points at the current one, and every instance it
// wants is a Node (an instance launched from the previous data before the
// switch is one that has not joined).
func (r *Reconciler) prunePrevious(ctx context.Context, s *scope, sec *corev1.Secret) error {
	previous := sec.Annotations[bootstrapv1.PreviousDataSecretAnnotation]
	if s.owner.pool == nil || previous == "" || s.owner.dataSecretName() != sec.Name {
		return nil
	}
	settled, err := r.poolSettled(ctx, s)
	if err != nil || !settled || s.owner.dataSecretName() != sec.Name {
		return err
	}
	if previous != sec.Name {
		if err := r.deleteRevision(ctx, s, previous); err != nil {
			return err
		}
	}
	orig := sec.DeepCopy()
	delete(sec.Annotations, bootstrapv1.PreviousDataSecretAnnotation)
	if err := r.Client.Patch(ctx, sec, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("forgetting the previous data secret on %s: %w", klog.KObj(sec), err)
	}
	return nil
}

// deleteRevision deletes the pool's data secret of an earlier revision, if
// it is still the config's: a Secret of that name that someone else
// controls is left alone.
func (r *Reconciler) deleteRevision(ctx context.Context, s *scope, name string) error {
	old := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: name}, old)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the earlier data secret %s: %w", name, err)
	case cannotTake(old, s.cfg) != "":
		return nil
	}
	if err := r.Client.Delete(ctx, old, client.Preconditions{UID: &old.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the earlier data secret %s: %w", klog.KObj(old), err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted an earlier data secret of the MachinePool: no instance boots from it", "Secret", klog.KObj(old))
	return nil
}
