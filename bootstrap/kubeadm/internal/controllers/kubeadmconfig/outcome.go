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

// errStop means: the scope's conditions say why nothing more can be done now.
var errStop = errors.New("stop")

// stopped is a reconcile outcome that is not an error: the conditions explain
// it; res says when to look again (zero: when a watched object changes).
type stopped struct{ res ctrl.Result }

func (stopped) Error() string { return errStop.Error() }

func (stopped) Is(target error) bool { return target == errStop }

func stop(res ctrl.Result) error { return stopped{res: res} }
