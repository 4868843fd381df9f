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
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
)

// tokenChecks remembers, per KubeadmConfig, when its token needs looking at
// next, so that the many events a joining Machine produces do not each cost a
// request to the workload cluster. Lost on restart, which costs one read.
type tokenChecks struct {
	mu   sync.Mutex
	next map[client.ObjectKey]tokenCheck
}

type tokenCheck struct {
	id string
	at time.Time
	// released: the token with id was deleted once the owner was done with it.
	released bool
	// dataGone: the event about a used data secret's deletion was recorded.
	dataGone bool
	// adopted is the hash of the token with id once the workload cluster was
	// found to hold it as a provider's token: it is looked after from then on.
	adopted string
}

func (c *tokenChecks) due(key client.ObjectKey, id string, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.next[key]; ok && t.id == id && now.Before(t.at) {
		return t.at.Sub(now)
	}
	return 0
}

// update changes the record of key under the lock.
func (c *tokenChecks) update(key client.ObjectKey, change func(t *tokenCheck)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		c.next = map[client.ObjectKey]tokenCheck{}
	}
	t := c.next[key]
	change(&t)
	c.next[key] = t
}

// set schedules the next look at the token with id (what else is recorded of
// that token stays).
func (c *tokenChecks) set(key client.ObjectKey, id string, at time.Time) {
	c.update(key, func(t *tokenCheck) {
		if t.id != id {
			*t = tokenCheck{id: id}
		}
		t.at = at
	})
}

// release records that the token with id is deleted, or not a provider's:
// later reconciles of the config have nothing to do for it.
func (c *tokenChecks) release(key client.ObjectKey, id string) {
	c.update(key, func(t *tokenCheck) { *t = tokenCheck{id: id, released: true} })
}

func (c *tokenChecks) released(key client.ObjectKey, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.next[key]
	return ok && t.released && t.id == id
}

// isAdopted reports whether tok, secret half included, was found to be a
// provider's and adopted.
func (c *tokenChecks) isAdopted(key client.ObjectKey, tok bootstraptoken.Token) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.next[key]
	return ok && t.id == tok.ID && t.adopted == tok.Hash()
}

// adopted records that tok was found to be a provider's.
func (c *tokenChecks) adopted(key client.ObjectKey, tok bootstraptoken.Token) {
	c.update(key, func(t *tokenCheck) {
		if t.id != tok.ID {
			*t = tokenCheck{id: tok.ID}
		}
		t.adopted = tok.Hash()
	})
}

// seenGone reports whether a used data secret's deletion was already
// reported, and records that it now is.
func (c *tokenChecks) seenGone(key client.ObjectKey) (seen bool) {
	c.update(key, func(t *tokenCheck) { seen, t.dataGone = t.dataGone, true })
	return seen
}

func (c *tokenChecks) forget(key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.next, key)
}
