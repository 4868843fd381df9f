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

package webhooks

import (
	"fmt"

	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
)

// SetupWithManager registers every admission webhook of this provider with
// mgr's webhook server, deciding formats with gates and reading what owns a
// created object through mgr's live reader.
func SetupWithManager(mgr ctrl.Manager, gates featuregate.FeatureGate) error {
	reader := mgr.GetAPIReader()
	if err := (&KubeadmConfig{Gates: gates, Reader: reader}).SetupWebhookWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the KubeadmConfig webhooks: %w", err)
	}
	if err := (&KubeadmConfigTemplate{Gates: gates, Reader: reader}).SetupWebhookWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the KubeadmConfigTemplate webhooks: %w", err)
	}
	if err := (&KubeadmControlPlaneBootstrap{Gates: gates, Reader: reader}).SetupWebhookWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the KubeadmControlPlane webhook: %w", err)
	}
	return nil
}
