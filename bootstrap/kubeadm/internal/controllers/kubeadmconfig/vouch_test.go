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

	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
)

// chosenSecret is the secret half a user with patch on KubeadmConfigs
// would like the workload cluster to accept.
const chosenSecret = "chosen0000000000"

// setSpecToken patches cfg's spec token, as such a user can.
func (f *fixture) setSpecToken(cfg *bootstrapv1.KubeadmConfig, tok bootstraptoken.Token) {
	f.t.Helper()
	f.get(cfg)
	before := cfg.DeepCopy()
	cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token = tok.Value()
	if err := mgmt.Client.Patch(f.ctx, cfg, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

// expectNoChosenToken fails if the workload cluster holds the token with id
// with the chosen secret half.
func expectNoChosenToken(t *testing.T, id string) {
	t.Helper()
	if s, ok := tokenSecret(t, id); ok && string(s.Data[bootstrapapi.BootstrapTokenSecretKey]) == chosenSecret {
		t.Fatalf("the workload cluster holds token %s with the secret half a spec chose", id)
	}
}

// TestChosenTokenBeforeTheData: a user writes into a Machine's spec, before
// its data exists, the token ID this config derives with a secret half of
// their choosing. The provider's token is never created from a spec: the
// config gets a token with a fresh secret.
func TestChosenTokenBeforeTheData(t *testing.T) {
	startManager(t)
	f := newRunningCluster(t)
	f.setClusterStatus(false, true) // no data until the infrastructure is up
	_, cfg := f.machine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
	f.get(cfg)
	chosen := bootstraptoken.Token{ID: bootstraptoken.DeriveID(cfg.UID, "", 0), Secret: chosenSecret}
	f.setSpecToken(cfg, chosen)
	f.setClusterStatus(true, true)
	f.waitForData(cfg)
	if got := f.specToken(cfg); got.Secret == chosenSecret {
		t.Error("the data was rendered with the chosen token")
	}
	expectNoChosenToken(t, chosen.ID)
}

// TestChosenSecretAfterTheData: once a Machine's data exists, a user changes
// the secret half of the spec's token. The provider never writes it into
// the workload cluster: not by "repairing" the token it looks after, nor by
// re-creating it after the token cleaner removed it and the manager
// restarted (nothing of the first manager's memory left).
func TestChosenSecretAfterTheData(t *testing.T) {
	stop := startManager(t, "--bootstrap-token-ttl="+testTTL.String())
	f := newRunningCluster(t)
	_, cfg := f.machine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
	f.waitForData(cfg)
	issued := f.specToken(cfg)
	chosen := bootstraptoken.Token{ID: issued.ID, Secret: chosenSecret}
	f.setSpecToken(cfg, chosen)
	// Two looks at the token (one per half TTL) with the chosen secret.
	deadline := time.Now().Add(testTTL + 2*time.Second)
	for time.Now().Before(deadline) {
		expectNoChosenToken(t, issued.ID)
		time.Sleep(250 * time.Millisecond)
	}
	stop()

	if s, ok := tokenSecret(t, issued.ID); ok {
		if err := workload.Client.Delete(f.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, "--bootstrap-token-ttl="+testTTL.String())
	deadline = time.Now().Add(testTTL + 2*time.Second)
	for time.Now().Before(deadline) {
		expectNoChosenToken(t, issued.ID)
		time.Sleep(250 * time.Millisecond)
	}
}
