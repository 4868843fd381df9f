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
	"errors"
	"slices"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// scope is one reconcile of one KubeadmConfig: the object whose status is
// being computed, what was found about it, and the secret values handled on
// the way, which no message may carry.
type scope struct {
	cfg     *bootstrapv1.KubeadmConfig
	owner   *owner
	cluster *clusterv1.Cluster

	// sensitive are values (a token, resolved contentFrom/passwdFrom values,
	// keys) that are scrubbed from every condition message, event and
	// returned error of this reconcile, whatever produced the message.
	sensitive []string
	// keepStatus leaves the status as it was (nothing is known yet).
	keepStatus bool
	// hadData: data was written for this config before this reconcile (its
	// status or its owner says so), so its machine may have run it already.
	hadData bool
	// renderHalted: a MachinePool's changed spec cannot be rendered (the
	// condition says why); its instances keep booting from the data that
	// exists, whose token is kept valid but not rotated.
	renderHalted bool
	// poolReadLive: owner.pool was read from the API server in this
	// reconcile, not from the cache.
	poolReadLive bool
}

const redacted = "[redacted]"

// Values shorter than this are not scrubbed: they would turn ordinary words
// into "[redacted]" and nothing that short is a credential worth the noise.
const minSensitiveLen = 6

// addSensitive records values to scrub; multi-line values are scrubbed line by
// line too, so a message quoting one line of a key or a file still leaks nothing.
func (s *scope) addSensitive(values ...string) {
	for _, v := range values {
		if v = strings.TrimSpace(v); len(v) >= minSensitiveLen {
			s.sensitive = append(s.sensitive, v)
		}
		if strings.Contains(v, "\n") {
			for _, line := range strings.Split(v, "\n") {
				if line = strings.TrimSpace(line); len(line) >= minSensitiveLen && !strings.HasPrefix(line, "-----") {
					s.sensitive = append(s.sensitive, line)
				}
			}
		}
	}
}

// redact scrubs every sensitive value from msg, longest first.
func (s *scope) redact(msg string) string {
	if len(s.sensitive) == 0 || msg == "" {
		return msg
	}
	values := slices.Clone(s.sensitive)
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	for _, v := range values {
		msg = strings.ReplaceAll(msg, v, redacted)
	}
	return msg
}

// redactError returns err with its message scrubbed (its chain is dropped:
// it only goes to controller-runtime's log from here).
func (s *scope) redactError(err error) error {
	if err == nil {
		return nil
	}
	if msg := s.redact(err.Error()); msg != err.Error() {
		return errors.New(msg)
	}
	return err
}
