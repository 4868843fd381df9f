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

package kubeadmconfig_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// TestOwnersCannotHandOverOtherSecrets: a Machine and a MachinePool whose
// spec names the Cluster's kubeconfig Secret as their data (uncontrolled, of
// Cluster API's secret type, as the kubeconfig is where no control-plane
// provider controls it) get no hold on it through their configs: it is not
// adopted (so deleting a config would not garbage-collect it), nor written,
// and the configs say why.
func TestOwnersCannotHandOverOtherSecrets(t *testing.T) {
	startManager(t)
	f := newRunningCluster(t)
	kubeconfig := &corev1.Secret{}
	if err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: f.cluster.Name + "-kubeconfig"}, kubeconfig); err != nil {
		t.Fatal(err)
	}

	// The Machine names the Secret before its config exists: were the
	// config rendered first, its own data would be what the Machine names.
	machine := f.newMachine("w", false)
	machine.Spec.Bootstrap.DataSecretName = ptr.To(kubeconfig.Name)
	f.create(machine)
	cfg := f.config("w", machine, joinSpec(bootstrapv1.CloudConfig, false))
	pool := f.machinePool("pool", 1)
	before2 := pool.DeepCopy()
	pool.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(kubeconfig.Name)
	if err := mgmt.Client.Patch(f.ctx, pool, client.MergeFrom(before2)); err != nil {
		t.Fatal(err)
	}
	poolCfg := f.config("pool", pool, joinSpec(bootstrapv1.CloudConfig, false))

	for _, c := range []*bootstrapv1.KubeadmConfig{cfg, poolCfg} {
		f.waitForReason(c, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition, bootstrapv1.KubeadmConfigDataSecretConflictReason)
	}
	time.Sleep(2 * time.Second) // more reconciles, if any were to come
	after := &corev1.Secret{}
	if err := mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(kubeconfig), after); err != nil {
		t.Fatal(err)
	}
	if len(after.OwnerReferences) != 0 {
		t.Errorf("the kubeconfig Secret got owners: %+v", after.OwnerReferences)
	}
	if after.ResourceVersion != kubeconfig.ResourceVersion {
		t.Errorf("the kubeconfig Secret was written")
	}
}
