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

	ctrl "sigs.k8s.io/controller-runtime"
)

// outcome is how a reconcile of a KubeadmConfig, or a step of it, ended. A
// step that could do its part returns the zero outcome and the reconcile
// goes on; one that stops it returns halt (nothing more can be done now, for
// a reason the scope's conditions say) or fail (an error, retried with
// back-off).
type outcome struct {
	// res says when to look again (zero: when a watched object changes).
	res ctrl.Result
	err error
	// halted: the reconcile stops early without an error.
	halted bool
}

// halt stops the reconcile here; the conditions say why, res when to look again.
func halt(res ctrl.Result) outcome { return outcome{res: res, halted: true} }

// fail stops the reconcile with err; nil is the zero outcome (carry on).
func fail(err error) outcome { return outcome{err: err} }

// done ends a reconcile that did all it could, looking again as res says.
func done(res ctrl.Result) outcome { return outcome{res: res} }

// stops reports whether the reconcile goes no further than this step.
func (o outcome) stops() bool { return o.halted || o.err != nil }

// with is o, halted, joined by what a further step did: its error, and its
// time to look again when that comes sooner.
func (o outcome) with(next outcome) outcome {
	o.err = errors.Join(o.err, next.err)
	if d := next.res.RequeueAfter; d > 0 && (o.res.RequeueAfter == 0 || d < o.res.RequeueAfter) {
		o.res.RequeueAfter = d
	}
	return o
}
