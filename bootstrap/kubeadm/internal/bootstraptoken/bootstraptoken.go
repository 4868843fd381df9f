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

// Package bootstraptoken manages the kubeadm bootstrap tokens a Cluster API
// kubeadm bootstrap provider creates in workload clusters for joining
// machines: creating them so that a retry finds the token an interrupted
// attempt made, extending them while the machine has not joined, re-creating
// them after the token cleaner removed them, and deleting them once used. It
// knows nothing about KubeadmConfigs beyond the owner it is told; the caller
// decides when to do what.
//
// A token is recognised by what both this provider and upstream's write
// (their description, bootstrapv1.BootstrapTokenDescription, and the token's
// own secret half), never by the UID of the KubeadmConfig it was made for:
// UIDs change with clusterctl move and restores, and upstream's tokens carry
// none.
package bootstraptoken

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstrapsecretutil "k8s.io/cluster-bootstrap/util/secrets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// nodeGroup is the group kubeadm grants node bootstrap permissions to.
const nodeGroup = "system:bootstrappers:kubeadm:default-node-token"

// Token is a bootstrap token. Its String form names only the public ID, so a
// token that reaches a log or a message by accident does not leak the secret.
type Token struct {
	ID     string
	Secret string
}

// Value is the token as kubeadm takes it: "<id>.<secret>".
func (t Token) Value() string { return bootstraputil.TokenFromIDAndSecret(t.ID, t.Secret) }

// Hash identifies the whole token, secret half included, without revealing
// it (a SHA-256 of the value: the 16-character secret half is too random to
// guess from it), so that the token data was rendered with can be recorded
// beside the data and checked later.
func (t Token) Hash() string {
	sum := sha256.Sum256([]byte(t.Value()))
	return hex.EncodeToString(sum[:])
}

// String names the token by its public ID only.
func (t Token) String() string { return "bootstrap token " + t.ID }

// GoString keeps %#v from printing the secret.
func (t Token) GoString() string { return t.String() }

// MarshalLog keeps structured loggers from printing the secret.
func (t Token) MarshalLog() any { return t.String() }

// Parse splits "<id>.<secret>". The error never repeats its input.
func Parse(s string) (Token, error) {
	m := bootstraputil.BootstrapTokenRegexp.FindStringSubmatch(s)
	if len(m) != 3 {
		return Token{}, errors.New("not a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}")
	}
	return Token{ID: m[1], Secret: m[2]}, nil
}

// Owner is the object a token is made for.
type Owner struct {
	UID       types.UID
	Namespace string
	Name      string
}

// ErrNotOwned is returned when a token Secret with the expected ID is not the
// token asked about: another secret half, or not made by a provider.
var ErrNotOwned = errors.New("the token secret with this ID is another token than the KubeadmConfig's")

// Manager works on the tokens of one workload cluster.
type Manager struct {
	// Client reads and writes kube-system Secrets of the workload cluster; it
	// should not read from a cache, so that a fresh token is seen at once.
	Client client.Client
	// TTL is how long a token stays valid after it is created or extended.
	TTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (m Manager) now() time.Time {
	if m.Now != nil {
		return m.Now().UTC()
	}
	return time.Now().UTC()
}

// maxIDAttempts bounds the search for a free ID when a derived ID is taken by
// someone else's token (one in two billion per attempt).
const maxIDAttempts = 5

// DeriveID is the token ID for owner replacing previous (empty for the first
// token) at the given attempt. Deriving it instead of drawing it makes
// creation idempotent: after a crash between creating the token and recording
// it, the retry computes the same ID and finds the token it already made.
// Token IDs are public by design; only the secret half is random.
func DeriveID(owner types.UID, previous string, attempt int) string {
	const chars = "0123456789abcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(string(owner) + "/" + previous + "/" + strconv.Itoa(attempt)))
	id := make([]byte, 6)
	for i := range id {
		id[i] = chars[int(sum[i])%len(chars)]
	}
	return string(id)
}

// Derived reports whether id is one Create would derive for owner replacing
// previous: a token this very config got moments ago (before a move or a
// restore gave it a new UID).
func Derived(owner types.UID, previous, id string) bool {
	for attempt := range maxIDAttempts {
		if DeriveID(owner, previous, attempt) == id {
			return true
		}
	}
	return false
}

// Create returns the token for owner that replaces previous (empty for the
// first), creating it unless an earlier attempt already did.
func (m Manager) Create(ctx context.Context, owner Owner, previous string) (Token, time.Time, error) {
	for attempt := range maxIDAttempts {
		fresh, err := bootstraputil.GenerateBootstrapToken()
		if err != nil {
			return Token{}, time.Time{}, fmt.Errorf("generating a bootstrap token: %w", err)
		}
		tok, _ := Parse(fresh)
		tok.ID = DeriveID(owner.UID, previous, attempt)
		expires := m.now().Add(m.TTL)
		err = m.Client.Create(ctx, m.secretFor(owner, tok, expires))
		if err == nil {
			return tok, expires, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return Token{}, time.Time{}, fmt.Errorf("creating %s: %w", tok, err)
		}
		existing, err := m.get(ctx, tok.ID)
		if err != nil {
			return Token{}, time.Time{}, err
		}
		if existing == nil || existing.Labels[bootstrapv1.BootstrapTokenConfigUIDLabel] != string(owner.UID) || owner.UID == "" {
			continue // deleted meanwhile or someone else's: try the next ID
		}
		expires, err = expiration(existing)
		if err != nil {
			return Token{}, time.Time{}, err
		}
		return Token{ID: tok.ID, Secret: bootstrapsecretutil.GetData(existing, bootstrapapi.BootstrapTokenSecretKey)}, expires, nil
	}
	return Token{}, time.Time{}, fmt.Errorf("no free bootstrap token ID after %d attempts", maxIDAttempts)
}

// KeepResult says what Keep did.
type KeepResult int

const (
	// Unchanged: the token has more than half its TTL left; nothing was written.
	Unchanged KeepResult = iota
	// Extended: the token's expiration was moved to now + TTL.
	Extended
	// Recreated: the token was gone and was created again with the same ID and secret.
	Recreated
	// Repaired: the token's Secret lacked what makes it a token (its ID or
	// secret, its authentication usage) and was written again in full.
	Repaired
	// Gone: the token was gone and Extend left it so.
	Gone
)

// Found says what the workload cluster holds under a token's ID.
type Found int

const (
	// Absent: no token Secret with that ID.
	Absent Found = iota
	// MadeByProvider: a usable token with the same secret half, made by a
	// Cluster API kubeadm bootstrap provider (this one or upstream's, whose
	// tokens a swap hands over).
	MadeByProvider
	// Other: a token with that ID that is not this one: another secret half,
	// made by hand (another description), or damaged.
	Other
)

// Find looks tok up in the workload cluster.
func (m Manager) Find(ctx context.Context, tok Token) (Found, error) {
	existing, err := m.get(ctx, tok.ID)
	switch {
	case err != nil:
		return Absent, err
	case existing == nil:
		return Absent, nil
	case intact(existing, tok.ID) && sameSecret(existing, tok) && madeByProvider(existing):
		return MadeByProvider, nil
	}
	return Other, nil
}

// Lookup returns the usable token a provider made with id, if the workload
// cluster holds one.
func (m Manager) Lookup(ctx context.Context, id string) (Token, bool, error) {
	existing, err := m.get(ctx, id)
	if err != nil || existing == nil || !intact(existing, id) || !madeByProvider(existing) {
		return Token{}, false, err
	}
	return Token{ID: id, Secret: bootstrapsecretutil.GetData(existing, bootstrapapi.BootstrapTokenSecretKey)}, true, nil
}

// Keep makes sure tok stays valid for owner: it re-creates a token that is
// gone (with the same secret: the machine already has it) and extends one
// that has less than half its TTL left. It returns when the token expires and
// what it did. A token with more than half its TTL left is not touched, so a
// caller checking every half TTL writes at most once per check.
//
// Keep writes tok's secret half into the workload cluster: the caller must
// know tok to be the one it handed out (the data it rendered carries it, or
// Find just said the cluster holds it), never only that a spec says so.
func (m Manager) Keep(ctx context.Context, owner Owner, tok Token) (time.Time, KeepResult, error) {
	return m.keep(ctx, owner, tok, true)
}

// Extend is Keep for a token that may have been used since: one that is
// gone stays gone (Gone), and the caller decides whether to Keep it.
func (m Manager) Extend(ctx context.Context, owner Owner, tok Token) (time.Time, KeepResult, error) {
	return m.keep(ctx, owner, tok, false)
}

func (m Manager) keep(ctx context.Context, owner Owner, tok Token, recreate bool) (time.Time, KeepResult, error) {
	existing, err := m.get(ctx, tok.ID)
	if err != nil {
		return time.Time{}, Unchanged, err
	}
	if existing != nil && !holds(existing, owner, tok) {
		return time.Time{}, Unchanged, fmt.Errorf("%s: %w", tok, ErrNotOwned)
	}
	if existing == nil || !intact(existing, tok.ID) || !sameSecret(existing, tok) {
		// Gone, or emptied or altered by whatever: the machine still has the
		// token, so that is what is written again (a Secret it cannot join
		// with is not worth extending).
		expires := m.now().Add(m.TTL)
		want := m.secretFor(owner, tok, expires)
		if existing == nil {
			if !recreate {
				return time.Time{}, Gone, nil
			}
			if err := m.Client.Create(ctx, want); err != nil {
				return time.Time{}, Unchanged, fmt.Errorf("re-creating %s: %w", tok, err)
			}
			return expires, Recreated, nil
		}
		existing.Data = want.Data
		if err := m.Client.Update(ctx, existing); err != nil {
			return time.Time{}, Unchanged, fmt.Errorf("repairing %s: %w", tok, err)
		}
		return expires, Repaired, nil
	}
	expires, err := expiration(existing)
	if err == nil && expires.Sub(m.now()) > m.RefreshBefore() {
		return expires, Unchanged, nil
	}
	expires = m.now().Add(m.TTL)
	existing.Data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(expires.Format(time.RFC3339))
	if err := m.Client.Update(ctx, existing); err != nil {
		return time.Time{}, Unchanged, fmt.Errorf("extending %s: %w", tok, err)
	}
	return expires, Extended, nil
}

// intact reports whether a token Secret still holds a usable token with id:
// its ID, a well-formed secret and the authentication usage.
func intact(s *corev1.Secret, id string) bool {
	return bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenIDKey) == id &&
		bootstraputil.IsValidBootstrapToken(bootstraputil.TokenFromIDAndSecret(id, bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenSecretKey))) &&
		bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenUsageAuthentication) == "true"
}

// RefreshBefore is how much validity a token may have left when Keep extends
// it: just over half the TTL, so that a check scheduled for the half-way point
// always extends it once.
func (m Manager) RefreshBefore() time.Duration {
	return m.TTL/2 + m.TTL/20
}

// NextCheck is when a token expiring at expires should next be kept.
func (m Manager) NextCheck(expires time.Time) time.Time {
	return expires.Add(-m.TTL / 2)
}

// Delete removes tok's Secret if it is tok (see Keep). A token that is
// already gone is not an error.
func (m Manager) Delete(ctx context.Context, owner Owner, tok Token) error {
	existing, err := m.get(ctx, tok.ID)
	if err != nil || existing == nil {
		return err
	}
	if !holds(existing, owner, tok) {
		return fmt.Errorf("%s: %w", tok, ErrNotOwned)
	}
	err = m.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", tok, err)
	}
	return nil
}

// get returns the token Secret with id, or nil when there is none.
func (m Manager) get(ctx context.Context, id string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: bootstraputil.BootstrapTokenSecretName(id)}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading bootstrap token %s: %w", id, err)
	}
	return s, nil
}

// holds reports whether the Secret named after tok's ID is tok's to keep or
// delete: made for owner (its label), or intact with tok's secret half, or,
// when damaged, made by a provider (its description). A token made by hand
// that happens to have the same ID is never touched.
func holds(s *corev1.Secret, owner Owner, tok Token) bool {
	switch {
	case s.Type != bootstrapapi.SecretTypeBootstrapToken:
		return false
	case owner.UID != "" && s.Labels[bootstrapv1.BootstrapTokenConfigUIDLabel] == string(owner.UID):
		return true
	case intact(s, tok.ID):
		return sameSecret(s, tok)
	}
	return madeByProvider(s)
}

func sameSecret(s *corev1.Secret, tok Token) bool {
	return subtle.ConstantTimeCompare([]byte(bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenSecretKey)), []byte(tok.Secret)) == 1
}

func madeByProvider(s *corev1.Secret) bool {
	return strings.HasPrefix(bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenDescriptionKey), bootstrapv1.BootstrapTokenDescription)
}

func expiration(s *corev1.Secret) (time.Time, error) {
	raw := bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenExpirationKey)
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, fmt.Errorf("bootstrap token %s has no valid expiration", s.Name)
	}
	return t, nil
}

func (m Manager) secretFor(owner Owner, tok Token, expires time.Time) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      bootstraputil.BootstrapTokenSecretName(tok.ID),
			Namespace: metav1.NamespaceSystem,
			Labels:    map[string]string{bootstrapv1.BootstrapTokenConfigUIDLabel: string(owner.UID)},
		},
		Type: bootstrapapi.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:               []byte(tok.ID),
			bootstrapapi.BootstrapTokenSecretKey:           []byte(tok.Secret),
			bootstrapapi.BootstrapTokenExpirationKey:       []byte(expires.Format(time.RFC3339)),
			bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
			bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
			bootstrapapi.BootstrapTokenExtraGroupsKey:      []byte(nodeGroup),
			bootstrapapi.BootstrapTokenDescriptionKey:      []byte(fmt.Sprintf("%s for KubeadmConfig %s/%s", bootstrapv1.BootstrapTokenDescription, owner.Namespace, owner.Name)),
		},
	}
}
