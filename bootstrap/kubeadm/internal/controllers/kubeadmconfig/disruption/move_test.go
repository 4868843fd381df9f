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

package disruption

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/bootstraptoken"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

// TestClusterctlMove: Cluster API's real clusterctl (v1.14.2) moves a cluster
// to a second management cluster, each with this provider's manager
// running: four joined machines (one with a config admission would refuse
// if it were new), a settled MachinePool whose token rotates and one with
// an instance still joining, whose token must stay valid. On
// the target (new UIDs everywhere) the data secrets are owned by the new
// configs, the settled pool's token rotates under the target's manager and
// the joining pool's is kept valid past its first TTL; the source keeps
// nothing, and no token is deleted by the source's manager as the moved
// objects are deleted there.
func TestClusterctlMove(t *testing.T) {
	const ttl = 20 * time.Second
	target := testenv.Start(t, testenv.Options{WithWebhooks: true, WithClusterAPI: true})
	serveWebhooks(t, target)
	for _, env := range []*testenv.Environment{mgmt, target} {
		labelForClusterctl(t, env)
	}
	f := newFixture(t, "move", true)
	startDeployment(t, mgmt, f.ns, "--bootstrap-token-ttl="+ttl.String())
	f.createMachines(3)
	f.must(f.createWorker("m-raw", bootstrapv1.KubeadmConfigSpec{PreKubeadmCommands: []string{"echo hi"}}))
	f.createPools(2)
	f.setPoolReplicas("pool-001", 2) // one instance joins still
	// The target's manager runs already, its lease in a namespace of the same name.
	f.must(target.Client.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}))
	d := startDeployment(t, target, f.ns, "--bootstrap-token-ttl="+ttl.String())
	f.waitFor(d, "data for every machine and pool", time.Minute, func() bool { return f.dataCount() == 6 })
	// m-raw's config gets the raw format annotation in place once its data
	// exists (as KubeadmControlPlane writes a new machine template's): the
	// update is admitted with a warning, though raw takes no commands and
	// its gate is off; clusterctl must still be able to create it again.
	f.setDataSecretNames()
	raw := &bootstrapv1.KubeadmConfig{}
	f.must(f.client().Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "m-raw"}, raw))
	patch := client.MergeFrom(raw.DeepCopy())
	raw.Annotations = map[string]string{bootstrapv1.FormatAnnotation: string(bootstrapv1.Raw)}
	f.must(f.client().Patch(f.ctx, raw, patch))
	// clusterctl moves only machines that have their Node.
	f.joinMachines()
	f.waitFor(d, "the joined machines' tokens to be deleted", time.Minute, func() bool { return len(f.tokensOf("m-")) == 0 })

	clusterctlMove(t, f.ns, target)
	if n := len(f.configs()); n != 0 {
		t.Errorf("%d configs left on the source cluster", n)
	}
	movedAt := time.Now()

	onTarget := &fixture{t: t, ctx: f.ctx, ns: f.ns, env: target}
	onTarget.restoreStatus()
	moved := onTarget.poolTokens()
	onTarget.waitFor(d, "pool-000's token to rotate on the target", 2*ttl, func() bool {
		return onTarget.poolTokens()["pool-000"] != moved["pool-000"]
	})
	// pool-001's token was made or extended on the source at most half a TTL
	// before the move: past one TTL after it, it lives only if the target's
	// manager extended it.
	time.Sleep(time.Until(movedAt.Add(ttl + 2*time.Second)))
	if got := onTarget.poolTokens()["pool-001"]; got != moved["pool-001"] {
		t.Errorf("pool-001's token changed from %s to %s while an instance was joining", tokenID(moved["pool-001"]), tokenID(got))
	}
	d.stop()

	for _, c := range onTarget.configs() {
		data := &corev1.Secret{}
		if err := target.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: c.Status.DataSecretName}, data); err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if ref := metav1.GetControllerOf(data); ref == nil || ref.UID != c.UID {
			t.Errorf("%s: its data secret's controller is %+v, not the moved config (UID %s)", c.Name, ref, c.UID)
		}
		if !strings.HasPrefix(c.Name, "pool-") {
			continue
		}
		spec, err := bootstraptoken.Parse(c.Spec.JoinConfiguration.Discovery.BootstrapToken.Token)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if got := data.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]; got != spec.ID {
			t.Errorf("%s: the data secret names token %q, the spec %s", c.Name, got, spec.ID)
		}
		onTarget.expectValid(c.Name, spec)
	}
	if n := len(onTarget.tokensOf("m-")); n != 0 {
		t.Errorf("%d tokens made for joined machines on the target", n)
	}
	secrets := &corev1.SecretList{}
	f.must(mgmt.Client.List(f.ctx, secrets, client.InNamespace(f.ns)))
	if len(secrets.Items) != 0 {
		t.Errorf("%d Secrets left on the source cluster", len(secrets.Items))
	}
}

// labelForClusterctl labels every CRD of Cluster API's groups as `clusterctl
// init` does: `clusterctl move` moves the kinds of the CRDs so labelled.
func labelForClusterctl(t *testing.T, env *testenv.Environment) {
	t.Helper()
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(context.Background(), crds); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, crd := range crds.Items {
		if strings.HasSuffix(crd.Spec.Group, "cluster.x-k8s.io") {
			names = append(names, crd.Name)
		}
	}
	if err := testenv.LabelCRDs(env.Config, names, map[string]string{"clusterctl.cluster.x-k8s.io": ""}); err != nil {
		t.Fatal(err)
	}
}

// clusterctlMove runs `clusterctl move` of namespace ns from the management
// cluster to target, as admins of both.
func clusterctlMove(t *testing.T, ns string, target *testenv.Environment) {
	t.Helper()
	dir := t.TempDir()
	from, err := mgmt.WriteAdminKubeconfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	toDir := filepath.Join(dir, "to")
	if err := os.Mkdir(toDir, 0o700); err != nil {
		t.Fatal(err)
	}
	to, err := target.WriteAdminKubeconfig(toDir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command(testbin.MustPath(t, "clusterctl"), "move", "--kubeconfig", from, "--to-kubeconfig", to, "--namespace", ns, "-v", "2")
	// Its configuration directory, not the user's.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("clusterctl move: %v\n%s", err, out)
	}
	t.Logf("clusterctl move took %s:\n%s", time.Since(start).Round(100*time.Millisecond), out)
}

// restoreStatus writes on the target what Cluster API's controllers find
// again after a move (clusterctl moves no status): the Cluster's
// infrastructure and control plane ready, each Machine's Node, each pool's
// Nodes (one per pool).
func (f *fixture) restoreStatus() {
	f.t.Helper()
	f.setClusterStatus(func(st *clusterv1.ClusterStatus) { st.Initialization.InfrastructureProvisioned = ptr.To(true) })
	f.initializeControlPlane()
	f.joinMachines()
	pools := &clusterv1.MachinePoolList{}
	f.must(f.client().List(f.ctx, pools, client.InNamespace(f.ns)))
	for i := range pools.Items {
		pool := &pools.Items[i]
		before := pool.DeepCopy()
		pool.Status.NodeRefs = []corev1.ObjectReference{{Kind: "Node", Name: pool.Name + "-0"}}
		f.must(f.client().Status().Patch(f.ctx, pool, client.MergeFrom(before)))
	}
}

// setDataSecretNames points every Machine at its data secret, as Cluster
// API's Machine controller does once the config has data.
func (f *fixture) setDataSecretNames() {
	f.t.Helper()
	f.updateMachines(false, func(m *clusterv1.Machine) { m.Spec.Bootstrap.DataSecretName = ptr.To(m.Name) })
}

// joinMachines gives every Machine its Node, as Cluster API does once the
// Node exists.
func (f *fixture) joinMachines() {
	f.t.Helper()
	f.updateMachines(true, func(m *clusterv1.Machine) { m.Status.NodeRef = clusterv1.MachineNodeReference{Name: m.Name} })
}

// updateMachines patches every Machine of the namespace with change, its
// status when status.
func (f *fixture) updateMachines(status bool, change func(m *clusterv1.Machine)) {
	f.t.Helper()
	machines := &clusterv1.MachineList{}
	f.must(f.client().List(f.ctx, machines, client.InNamespace(f.ns)))
	for i := range machines.Items {
		m := &machines.Items[i]
		before := m.DeepCopy()
		change(m)
		if status {
			f.must(f.client().Status().Patch(f.ctx, m, client.MergeFrom(before)))
		} else {
			f.must(f.client().Patch(f.ctx, m, client.MergeFrom(before)))
		}
	}
}

// setPoolReplicas sets a pool's replicas (its Nodes stay as they are).
func (f *fixture) setPoolReplicas(name string, replicas int32) {
	f.t.Helper()
	pool := &clusterv1.MachinePool{}
	f.must(f.client().Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, pool))
	before := pool.DeepCopy()
	pool.Spec.Replicas = ptr.To(replicas)
	f.must(f.client().Patch(f.ctx, pool, client.MergeFrom(before)))
}

// tokensOf is the workload cluster's bootstrap tokens labelled with the UID
// of a config whose name starts with prefix.
func (f *fixture) tokensOf(prefix string) []corev1.Secret {
	f.t.Helper()
	owners := map[string]bool{}
	for _, c := range f.configs() {
		if strings.HasPrefix(c.Name, prefix) {
			owners[string(c.UID)] = true
		}
	}
	tokens := &corev1.SecretList{}
	f.must(workload.Client.List(f.ctx, tokens, client.InNamespace(metav1.NamespaceSystem)))
	var out []corev1.Secret
	for _, s := range tokens.Items {
		if s.Type == bootstrapapi.SecretTypeBootstrapToken && owners[s.Labels[bootstrapv1.BootstrapTokenConfigUIDLabel]] {
			out = append(out, s)
		}
	}
	return out
}

// expectValid checks that tok exists in the workload cluster with its
// secret and has not expired.
func (f *fixture) expectValid(name string, tok bootstraptoken.Token) {
	f.t.Helper()
	live := &corev1.Secret{}
	if err := workload.Client.Get(f.ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: bootstrapapi.BootstrapTokenSecretPrefix + tok.ID}, live); err != nil {
		f.t.Errorf("%s: its token %s: %v", name, tok.ID, err)
		return
	}
	if string(live.Data[bootstrapapi.BootstrapTokenSecretKey]) != tok.Secret {
		f.t.Errorf("%s: token %s in the workload cluster has another secret than the spec's", name, tok.ID)
	}
	expires, err := time.Parse(time.RFC3339, string(live.Data[bootstrapapi.BootstrapTokenExpirationKey]))
	if err != nil || !expires.After(time.Now()) {
		f.t.Errorf("%s: token %s is not valid at %s (expiration %q)", name, tok.ID, time.Now().UTC().Format(time.RFC3339), live.Data[bootstrapapi.BootstrapTokenExpirationKey])
	}
}

func tokenID(token string) string {
	id, _, _ := strings.Cut(token, ".")
	return id
}
