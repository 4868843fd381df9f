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

package bootstraptoken_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newManager() (bootstraptoken.Manager, client.Client, *clock) {
	c := fake.NewClientBuilder().Build()
	clk := &clock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	return bootstraptoken.Manager{Client: c, TTL: 15 * time.Minute, Now: clk.now}, c, clk
}

var owner = bootstraptoken.Owner{UID: "uid-1", Namespace: "ns", Name: "worker-0"}

func tokenSecret(t *testing.T, c client.Client, id string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: bootstraputil.BootstrapTokenSecretName(id)}, s); err != nil {
		t.Fatalf("token %s: %v", id, err)
	}
	return s
}

func TestCreateIsIdempotentPerOwnerAndPrevious(t *testing.T) {
	m, c, _ := newManager()
	ctx := context.Background()
	first, _, err := m.Create(ctx, owner, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bootstraputil.IsValidBootstrapToken(first.Value()) {
		t.Fatalf("not a valid token: %s", first)
	}
	again, _, err := m.Create(ctx, owner, "")
	if err != nil || again != first {
		t.Fatalf("a retry must find the first token: %v %v", again, err)
	}
	s := tokenSecret(t, c, first.ID)
	if s.Type != bootstrapapi.SecretTypeBootstrapToken || s.Labels[bootstrapv1.BootstrapTokenConfigUIDLabel] != "uid-1" ||
		string(s.Data[bootstrapapi.BootstrapTokenExtraGroupsKey]) != "system:bootstrappers:kubeadm:default-node-token" {
		t.Errorf("token secret: %+v", s)
	}
	next, _, err := m.Create(ctx, owner, first.ID)
	if err != nil || next.ID == first.ID {
		t.Fatalf("a replacement must get its own ID: %v %v", next, err)
	}
	list := &corev1.SecretList{}
	if err := c.List(ctx, list); err != nil || len(list.Items) != 2 {
		t.Fatalf("want 2 tokens, got %d (%v)", len(list.Items), err)
	}
}

func TestCreateSkipsSomeoneElsesID(t *testing.T) {
	m, c, _ := newManager()
	ctx := context.Background()
	taken := bootstraptoken.DeriveID(owner.UID, "", 0)
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(taken), Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data:       map[string][]byte{bootstrapapi.BootstrapTokenSecretKey: []byte("0123456789abcdef")},
	}
	if err := c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	tok, _, err := m.Create(ctx, owner, "")
	if err != nil || tok.ID == taken || tok.ID != bootstraptoken.DeriveID(owner.UID, "", 1) {
		t.Fatalf("want the next derived ID, got %v %v", tok, err)
	}
}

func TestKeepExtendsRecreatesAndLeavesFreshTokensAlone(t *testing.T) {
	m, c, clk := newManager()
	ctx := context.Background()
	tok, expires, err := m.Create(ctx, owner, "")
	if err != nil {
		t.Fatal(err)
	}
	got, did, err := m.Keep(ctx, owner, tok)
	if err != nil || did != bootstraptoken.Unchanged || !got.Equal(expires) {
		t.Fatalf("a fresh token must not be written: %v %v %v", got, did, err)
	}
	clk.t = m.NextCheck(expires)
	got, did, err = m.Keep(ctx, owner, tok)
	if err != nil || did != bootstraptoken.Extended || !got.Equal(clk.t.Add(m.TTL)) {
		t.Fatalf("at the half-way check the token must be extended: %v %v %v", got, did, err)
	}
	if err := c.Delete(ctx, tokenSecret(t, c, tok.ID)); err != nil {
		t.Fatal(err)
	}
	if _, did, err = m.Keep(ctx, owner, tok); err != nil || did != bootstraptoken.Recreated {
		t.Fatalf("a deleted token must be re-created: %v %v", did, err)
	}
	s := tokenSecret(t, c, tok.ID)
	if string(s.Data[bootstrapapi.BootstrapTokenSecretKey]) != tok.Secret {
		t.Error("re-created token must keep its secret: the machine already has it")
	}
}

// TestExtendLeavesAGoneTokenGone: the caller decides whether a token that
// is gone (maybe used and deleted) is made again; Lookup finds a provider's
// usable token by its ID, secret half included, and nothing else.
func TestExtendLeavesAGoneTokenGone(t *testing.T) {
	m, c, _ := newManager()
	ctx := context.Background()
	tok, _, err := m.Create(ctx, owner, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, found, err := m.Lookup(ctx, tok.ID); err != nil || !found || got != tok {
		t.Fatalf("Lookup: %v %v %v", got, found, err)
	}
	if err := c.Delete(ctx, tokenSecret(t, c, tok.ID)); err != nil {
		t.Fatal(err)
	}
	if _, did, err := m.Extend(ctx, owner, tok); err != nil || did != bootstraptoken.Gone {
		t.Fatalf("Extend of a deleted token: %v %v", did, err)
	}
	if _, found, err := m.Lookup(ctx, tok.ID); err != nil || found {
		t.Fatalf("Extend made the token again (found %v, %v)", found, err)
	}
	byHand := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + tok.ID, Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data: map[string][]byte{bootstrapapi.BootstrapTokenIDKey: []byte(tok.ID), bootstrapapi.BootstrapTokenSecretKey: []byte(tok.Secret),
			bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"), bootstrapapi.BootstrapTokenDescriptionKey: []byte("made by hand")},
	}
	if err := c.Create(ctx, byHand); err != nil {
		t.Fatal(err)
	}
	if _, found, err := m.Lookup(ctx, tok.ID); err != nil || found {
		t.Fatalf("Lookup found a token made by hand (%v)", err)
	}
}

// TestTokensKnownByTheirSecretNotTheirOwnersUID: after clusterctl move or a
// restore the KubeadmConfig has a new UID, and tokens upstream's provider made
// carry no UID at all; the token is still kept and deleted. A token made by
// hand that has the same ID (another secret half) is neither.
func TestTokensKnownByTheirSecretNotTheirOwnersUID(t *testing.T) {
	m, c, _ := newManager()
	ctx := context.Background()
	tok, _, err := m.Create(ctx, owner, "")
	if err != nil {
		t.Fatal(err)
	}
	moved := bootstraptoken.Owner{UID: "uid-after-move", Namespace: owner.Namespace, Name: owner.Name}
	if _, did, err := m.Keep(ctx, moved, tok); err != nil || did != bootstraptoken.Unchanged {
		t.Fatalf("keeping the token after a move: %v %v", did, err)
	}
	if found, err := m.Find(ctx, tok); err != nil || found != bootstraptoken.MadeByProvider {
		t.Fatalf("Find of a token this provider made: %v %v", found, err)
	}
	impostor := bootstraptoken.Token{ID: tok.ID, Secret: "ffffffffffffffff"}
	if err := m.Delete(ctx, moved, impostor); !errors.Is(err, bootstraptoken.ErrNotOwned) {
		t.Fatalf("deleting with another secret half: %v", err)
	}
	if _, _, err := m.Keep(ctx, moved, impostor); !errors.Is(err, bootstraptoken.ErrNotOwned) {
		t.Fatalf("keeping with another secret half: %v", err)
	}
	if found, err := m.Find(ctx, impostor); err != nil || found != bootstraptoken.Other {
		t.Fatalf("Find with another secret half: %v %v", found, err)
	}
	if err := m.Delete(ctx, moved, tok); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, moved, tok); err != nil {
		t.Fatalf("deleting a gone token: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: bootstraputil.BootstrapTokenSecretName(tok.ID)}, &corev1.Secret{}); err == nil {
		t.Fatal("token still there")
	}
}

// TestUpstreamAndHandMadeTokens: a token upstream's provider made (its
// description, no label) is a provider's; one made with kubeadm token create
// is not, and is never kept or deleted.
func TestUpstreamAndHandMadeTokens(t *testing.T) {
	m, c, _ := newManager()
	ctx := context.Background()
	put := func(id, secret, description string) bootstraptoken.Token {
		t.Helper()
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(id), Namespace: metav1.NamespaceSystem},
			Type:       bootstrapapi.SecretTypeBootstrapToken,
			Data: map[string][]byte{
				bootstrapapi.BootstrapTokenIDKey:               []byte(id),
				bootstrapapi.BootstrapTokenSecretKey:           []byte(secret),
				bootstrapapi.BootstrapTokenExpirationKey:       []byte("2026-12-03T12:05:00Z"),
				bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
				bootstrapapi.BootstrapTokenDescriptionKey:      []byte(description),
			},
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return bootstraptoken.Token{ID: id, Secret: secret}
	}
	upstream := put("up0000", "0123456789abcdef", bootstrapv1.BootstrapTokenDescription)
	handMade := put("hand00", "0123456789abcdef", "made with kubeadm token create")
	if found, err := m.Find(ctx, upstream); err != nil || found != bootstraptoken.MadeByProvider {
		t.Fatalf("upstream's token: %v %v", found, err)
	}
	if found, err := m.Find(ctx, handMade); err != nil || found != bootstraptoken.Other {
		t.Fatalf("a hand-made token: %v %v", found, err)
	}
	if found, err := m.Find(ctx, bootstraptoken.Token{ID: "gone00", Secret: "0123456789abcdef"}); err != nil || found != bootstraptoken.Absent {
		t.Fatalf("a token that does not exist: %v %v", found, err)
	}
	if _, did, err := m.Keep(ctx, bootstraptoken.Owner{UID: "any"}, upstream); err != nil || did != bootstraptoken.Extended {
		t.Fatalf("keeping upstream's token (5 minutes of 15 left): %v %v", did, err)
	}
}

func TestTokenNeverPrintsItsSecret(t *testing.T) {
	tok, err := bootstraptoken.Parse("abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, tok), fmt.Sprint(tok.MarshalLog())} {
		if strings.Contains(s, tok.Secret) {
			t.Errorf("printed the secret: %s", s)
		}
	}
	if _, err := bootstraptoken.Parse("abcdef.0123456789abcdeX"); err == nil || strings.Contains(err.Error(), "0123456789") {
		t.Errorf("parse error must not echo its input: %v", err)
	}
}

// FuzzKeepTokenSecretShapes: whatever shape a token Secret this provider
// made has been left in (fields missing, empty, malformed; no data at all),
// Keep neither panics nor leaves it unusable: afterwards the Secret holds the
// recorded token, with an expiration in the future.
func FuzzKeepTokenSecretShapes(f *testing.F) {
	f.Add(uint8(0), "", "", "", "", false)
	f.Add(uint8(0xff), "abcdef", "0123456789abcdef", "2026-12-03T12:10:00Z", "true", false)
	f.Add(uint8(0x3), "abcdef", "short", "yesterday", "false", true)
	f.Add(uint8(0x8), "zzzzzz", "0123456789abcdef", "2026-12-03T11:00:00Z", "", false)
	f.Fuzz(func(t *testing.T, present uint8, id, secret, expiration, auth string, nilData bool) {
		m, c, clk := newManager()
		ctx := context.Background()
		tok, _, err := m.Create(ctx, owner, "")
		if err != nil {
			t.Fatal(err)
		}
		s := tokenSecret(t, c, tok.ID)
		fields := []struct{ key, value string }{
			{bootstrapapi.BootstrapTokenIDKey, id},
			{bootstrapapi.BootstrapTokenSecretKey, secret},
			{bootstrapapi.BootstrapTokenExpirationKey, expiration},
			{bootstrapapi.BootstrapTokenUsageAuthentication, auth},
		}
		for i, fl := range fields {
			if present&(1<<i) == 0 {
				delete(s.Data, fl.key)
			} else {
				s.Data[fl.key] = []byte(fl.value)
			}
		}
		if nilData {
			s.Data = nil
		}
		if err := c.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		expires, _, err := m.Keep(ctx, owner, tok)
		if err != nil {
			t.Fatalf("Keep: %v", err)
		}
		s = tokenSecret(t, c, tok.ID)
		got := bootstraputil.TokenFromIDAndSecret(string(s.Data[bootstrapapi.BootstrapTokenIDKey]), string(s.Data[bootstrapapi.BootstrapTokenSecretKey]))
		if got != tok.Value() || string(s.Data[bootstrapapi.BootstrapTokenUsageAuthentication]) != "true" {
			t.Fatalf("after Keep the Secret holds another token or no authentication usage: %v", s.Data)
		}
		stored, err := time.Parse(time.RFC3339, string(s.Data[bootstrapapi.BootstrapTokenExpirationKey]))
		if err != nil || !stored.After(clk.now()) || !stored.Equal(expires) {
			t.Fatalf("after Keep the expiration is %q, Keep said %s", s.Data[bootstrapapi.BootstrapTokenExpirationKey], expires)
		}
	})
}
