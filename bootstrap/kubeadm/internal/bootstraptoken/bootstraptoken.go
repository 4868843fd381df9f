// Package bootstraptoken manages the kubeadm bootstrap tokens this provider
// creates in workload clusters for joining machines: creating them so that a
// retry finds the token an interrupted attempt made, extending them while the
// machine has not joined, re-creating them after the token cleaner removed
// them, and deleting them once used. It knows nothing about KubeadmConfigs
// beyond the owner it is told; the caller decides when to do what.
package bootstraptoken

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstrapsecretutil "k8s.io/cluster-bootstrap/util/secrets"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnerUIDLabel marks a token Secret in the workload cluster with the UID of
// the KubeadmConfig it was made for. Only tokens carrying the owner's UID are
// ever extended, re-created over or deleted: tokens a user wrote into a spec,
// or made by hand, are left alone.
const OwnerUIDLabel = "bootstrap.cluster.x-k8s.io/kubeadm-config-uid"

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

// ErrNotOwned is returned when a token Secret with the expected ID belongs to
// someone else.
var ErrNotOwned = errors.New("the token secret with this ID was not created for this KubeadmConfig")

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
		if existing == nil || !owns(existing, owner) {
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
)

// Keep makes sure the token with id stays valid for owner: it re-creates a
// token that is gone (with the secret that secretOf returns, the one the
// machine already has) and extends one that has less than half its TTL left.
// It returns when the token expires and what it did. A token with more than
// half its TTL left is not touched, so a caller checking every half TTL writes
// at most once per check.
func (m Manager) Keep(ctx context.Context, owner Owner, id string, secretOf func(context.Context) (Token, error)) (time.Time, KeepResult, error) {
	existing, err := m.get(ctx, id)
	if err != nil {
		return time.Time{}, Unchanged, err
	}
	if existing != nil && !owns(existing, owner) {
		return time.Time{}, Unchanged, fmt.Errorf("bootstrap token %s: %w", id, ErrNotOwned)
	}
	if existing == nil || !intact(existing, id) {
		// Gone, or emptied by whatever: the machine still has the recorded
		// token, so that is what is written again (a Secret nobody can join
		// with is not worth extending).
		tok, err := secretOf(ctx)
		if err != nil {
			return time.Time{}, Unchanged, err
		}
		if tok.ID != id {
			return time.Time{}, Unchanged, fmt.Errorf("bootstrap token %s: the recorded token has ID %s", id, tok.ID)
		}
		expires := m.now().Add(m.TTL)
		want := m.secretFor(owner, tok, expires)
		if existing == nil {
			if err := m.Client.Create(ctx, want); err != nil {
				return time.Time{}, Unchanged, fmt.Errorf("re-creating %s: %w", tok, err)
			}
			return expires, Recreated, nil
		}
		existing.Data = want.Data
		if err := m.Client.Update(ctx, existing); err != nil {
			return time.Time{}, Unchanged, fmt.Errorf("repairing bootstrap token %s: %w", id, err)
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
		return time.Time{}, Unchanged, fmt.Errorf("extending bootstrap token %s: %w", id, err)
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

// Delete removes the token Secret with id if it was made for owner. A token
// that is already gone is not an error.
func (m Manager) Delete(ctx context.Context, owner Owner, id string) error {
	existing, err := m.get(ctx, id)
	if err != nil || existing == nil {
		return err
	}
	if !owns(existing, owner) {
		return fmt.Errorf("bootstrap token %s: %w", id, ErrNotOwned)
	}
	err = m.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting bootstrap token %s: %w", id, err)
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

func owns(s *corev1.Secret, owner Owner) bool {
	return s.Type == bootstrapapi.SecretTypeBootstrapToken && owner.UID != "" && s.Labels[OwnerUIDLabel] == string(owner.UID)
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
			Labels:    map[string]string{OwnerUIDLabel: string(owner.UID)},
		},
		Type: bootstrapapi.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:               []byte(tok.ID),
			bootstrapapi.BootstrapTokenSecretKey:           []byte(tok.Secret),
			bootstrapapi.BootstrapTokenExpirationKey:       []byte(expires.Format(time.RFC3339)),
			bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
			bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
			bootstrapapi.BootstrapTokenExtraGroupsKey:      []byte(nodeGroup),
			bootstrapapi.BootstrapTokenDescriptionKey: []byte(fmt.Sprintf(
				"token generated by cluster-api-bootstrap-provider-kubeadm for KubeadmConfig %s/%s", owner.Namespace, owner.Name)),
		},
	}
}
