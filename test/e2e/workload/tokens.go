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

package workload

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// BootingWorker waits until a MachineDeployment has a Machine (not among
// known) with its data and no Node yet, and returns its name. The swap must
// find it booting, or the test would prove nothing about its token.
func (w *Cluster) BootingWorker(md string, known map[string]string) string {
	w.t.Helper()
	var name string
	w.WaitFor(3*time.Minute, "a booting worker of "+md, func() bool {
		var machines clusterv1.MachineList
		if err := w.c.List(context.Background(), &machines, client.InNamespace(w.Namespace),
			client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil {
			return false
		}
		for _, m := range machines.Items {
			if _, old := known[m.Name]; !old && m.Spec.Bootstrap.DataSecretName != nil {
				name = m.Name
				return true
			}
		}
		return false
	})
	w.ExpectBooting(name)
	return name
}

// ExpectBooting fails the test when the Machine already has its Node.
func (w *Cluster) ExpectBooting(machine string) {
	w.t.Helper()
	m := &clusterv1.Machine{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, machine), m); err != nil {
		w.t.Fatal(err)
	}
	if m.Status.NodeRef.IsDefined() {
		w.t.Fatalf("machine %s joined before the swap: its boot did not span it", machine)
	}
}

// WaitForRotation waits until the pool's token rotates (the running manager
// makes a new one for its next instances), in its spec and its data.
// Upstream's provider writes the new token into the spec before it renders
// the data, and keeps the old one valid no longer: an instance added in
// between would boot with a token about to expire. Scaling right after an
// observed rotation leaves a whole rotation period before the next one.
func (w *Cluster) WaitForRotation(pool string, within time.Duration) {
	w.t.Helper()
	before := w.PoolTokenID(pool)
	rotated := func() (inSpec, inData bool) {
		tok := w.poolToken(pool)
		data := w.DataSecretObjects()[w.PoolDataSecretName(pool)].Data
		// The kubeadm configuration the data delivers (Ignition's files are
		// data URLs), as the machine reads it.
		_, kubeadm, err := consumers.KubeadmConfigIn(string(data["format"]), data["value"])
		return !strings.HasPrefix(tok, before+"."), err == nil && bytes.Contains(kubeadm, []byte(tok))
	}
	w.WaitFor(within, "the token of pool "+pool+" to rotate, in its spec and its data", func() bool {
		inSpec, inData := rotated()
		return inSpec && inData
	}, func() string {
		inSpec, inData := rotated()
		return fmt.Sprintf("token %s before; rotated in the config's spec: %v; the spec's token in data secret %q: %v",
			before, inSpec, w.PoolDataSecretName(pool), inData)
	})
}

// ExpectRotationsRollNothing waits for each pool's token to rotate the
// given number of times, then checks that no pool rolled: each still names
// the data secret it named, and has the instances it had.
func (w *Cluster) ExpectRotationsRollNothing(pools []string, rotations int, within time.Duration) {
	w.t.Helper()
	type state struct {
		dataSecret string
		instances  []string
	}
	now := func(pool string) state {
		s := state{dataSecret: w.PoolDataSecretName(pool)}
		for _, in := range w.SimulatedPool(pool).Status.Instances {
			s.instances = append(s.instances, in.Name)
		}
		return s
	}
	before := map[string]state{}
	for _, pool := range pools {
		before[pool] = now(pool)
	}
	for range rotations {
		for _, pool := range pools {
			w.WaitForRotation(pool, within)
		}
	}
	for _, pool := range pools {
		if after := now(pool); after.dataSecret != before[pool].dataSecret || !slices.Equal(after.instances, before[pool].instances) {
			w.t.Errorf("pool %s rolled across %d token rotations: data secret %s, instances %v before; %s, %v after",
				pool, rotations, before[pool].dataSecret, before[pool].instances, after.dataSecret, after.instances)
		}
	}
}

// RotateAndScale waits until the pool's token rotates, then scales the pool
// to replicas and checks the new instances booted with the rotated data.
func (w *Cluster) RotateAndScale(pool string, replicas int32, within time.Duration) {
	w.t.Helper()
	before := w.SimulatedPool(pool).Status.Instances
	w.WaitForRotation(pool, within)
	old := len(w.SimulatedPool(pool).Status.Instances)
	w.ScalePool(pool, replicas)
	w.WaitForPools(map[string]bootstrapv1.Format{pool: bootstrapv1.CloudConfig}, replicas, 4*time.Minute)
	instances := w.SimulatedPool(pool).Status.Instances
	// The rotation rewrote the pool's data secret under its name: the
	// simulated cloud, which rolls on a new name, replaced no instance.
	for _, earlier := range before {
		if !slices.ContainsFunc(instances, func(in infrav1.SimulatedInstance) bool { return in.Name == earlier.Name }) {
			w.t.Errorf("pool %s: instance %s was replaced across a token rotation", pool, earlier.Name)
		}
	}
	for _, in := range instances[old:] {
		for _, earlier := range instances[:old] {
			if in.DataSecretVersion == earlier.DataSecretVersion {
				w.t.Errorf("pool %s: instance %s booted with the data %s did, not the rotated one", pool, in.Name, earlier.Name)
			}
		}
	}
}

// ExpectMadeByUpstream checks that upstream's manager made every data secret
// and token so far: none carries this provider's annotation.
func (w *Cluster) ExpectMadeByUpstream() {
	w.t.Helper()
	for _, s := range w.DataSecretObjects() {
		if id, ok := s.Annotations[bootstrapv1.BootstrapTokenIDAnnotation]; ok {
			w.t.Errorf("data secret %s was written by this provider (token %s) while upstream's ran", s.Name, id)
		}
	}
}

// DataSecretObjects returns the namespace's bootstrap data secrets by name.
func (w *Cluster) DataSecretObjects() map[string]corev1.Secret {
	w.t.Helper()
	var secrets corev1.SecretList
	if err := w.c.List(context.Background(), &secrets, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]corev1.Secret{}
	for _, s := range secrets.Items {
		if s.Type == clusterv1.ClusterSecretType && len(s.OwnerReferences) > 0 && s.OwnerReferences[0].Kind == "KubeadmConfig" && isDataSecretOf(s.Name, s.OwnerReferences[0].Name) {
			out[s.Name] = s
		}
	}
	return out
}

// revisionDigest is how a MachinePool's data secret name ends after its
// config's name (docs/user/topologies.md); the certificates a config owns
// are named otherwise.
var revisionDigest = regexp.MustCompile(`^-[0-9a-f]{10}$`)

// isDataSecretOf reports whether a Secret named name that the config named
// config owns is its data secret: named after it, or a pool's revision.
func isDataSecretOf(name, config string) bool {
	rest, ok := strings.CutPrefix(name, config)
	return ok && (rest == "" || revisionDigest.MatchString(rest))
}

// Kept is what a swap must leave as it is: the Machines and MachineSets (a
// replaced one is a rollout) and the Machines' data secrets (by resource
// version: not rewritten).
type Kept struct {
	// Machines maps each Machine to its UID.
	Machines          map[string]string
	machineSets, data map[string]string
}

// Keep records what a swap must leave as it is.
func (w *Cluster) Keep() Kept {
	w.t.Helper()
	k := Kept{Machines: map[string]string{}, machineSets: map[string]string{}, data: map[string]string{}}
	var machines clusterv1.MachineList
	var sets clusterv1.MachineSetList
	if err := w.c.List(context.Background(), &machines, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.List(context.Background(), &sets, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	data := w.DataSecretObjects()
	for _, m := range machines.Items {
		k.Machines[m.Name] = string(m.UID)
		if s, ok := data[m.Name]; ok {
			k.data[m.Name] = s.ResourceVersion
		}
	}
	for _, s := range sets.Items {
		k.machineSets[s.Name] = string(s.UID)
	}
	return k
}

func (k Kept) ExpectKept(w *Cluster) {
	w.t.Helper()
	now := w.Keep()
	for _, c := range []struct {
		what         string
		before, left map[string]string
	}{{"Machine", k.Machines, now.Machines}, {"MachineSet", k.machineSets, now.machineSets}, {"data secret", k.data, now.data}} {
		for name, v := range c.before {
			if c.left[name] != v {
				w.t.Errorf("%s %s changed across the swap (%q, now %q)", c.what, name, v, c.left[name])
			}
		}
	}
}

// SpecTokens records, every second until the test ends, the bootstrap token
// ID each config's spec names: the source of truth both providers share.
type SpecTokens struct {
	mu      sync.Mutex
	seen    map[string][]string // config -> token IDs in the order seen
	sources []client.Client     // management clusters the configs may be in
}

// WatchSpecTokens samples the configs in the cluster's management cluster
// and in those added by watch.
func (w *Cluster) WatchSpecTokens() *SpecTokens {
	st := &SpecTokens{seen: map[string][]string{}, sources: []client.Client{w.c}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			st.mu.Lock()
			sources := slices.Clone(st.sources)
			st.mu.Unlock()
			for _, source := range sources {
				var configs bootstrapv1.KubeadmConfigList
				if err := source.List(ctx, &configs, client.InNamespace(w.Namespace)); err != nil {
					continue // a lost management cluster
				}
				st.mu.Lock()
				for _, c := range configs.Items {
					id, _, _ := strings.Cut(c.Spec.JoinConfiguration.Discovery.BootstrapToken.Token, ".")
					if ids := st.seen[c.Name]; id != "" && (len(ids) == 0 || ids[len(ids)-1] != id) {
						st.seen[c.Name] = append(ids, id)
					}
				}
				st.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	w.t.Cleanup(func() { cancel(); <-done })
	return st
}

// Watch adds a management cluster the configs may be moved to.
func (s *SpecTokens) Watch(c client.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sources = append(s.sources, c)
}

// ExpectNoStray checks every bootstrap token a provider made in the workload
// cluster was named by a config's spec, and that no Machine's config ever
// named more than one (a MachinePool's rotates).
func (s *SpecTokens) ExpectNoStray(w *Cluster) {
	w.t.Helper()
	secrets, err := w.WorkloadClient().CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(),
		metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeBootstrapToken)})
	if err != nil {
		w.t.Fatal(err)
	}
	// A rotation in flight makes its token just before it names it in the
	// spec: compare after the sampler has looked a few more times.
	time.Sleep(3 * time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	named := map[string]string{}
	for config, ids := range s.seen {
		for _, id := range ids {
			named[id] = config
		}
		if !strings.HasSuffix(config, "-pool") && len(ids) > 1 {
			w.t.Errorf("config %s named tokens %v: a Machine's token was replaced", config, ids)
		}
	}
	var stray []string
	made := 0
	for _, sec := range secrets.Items {
		// Every token a kubeadm bootstrap provider makes (upstream's and
		// this one's alike) has this description; kubeadm init's own has
		// another.
		description := string(sec.Data["description"])
		if !strings.HasPrefix(description, bootstrapv1.BootstrapTokenDescription) {
			continue
		}
		made++
		if id := strings.TrimPrefix(sec.Name, "bootstrap-token-"); named[id] == "" {
			stray = append(stray, fmt.Sprintf("%s (%q)", id, description))
		}
	}
	if len(stray) > 0 {
		w.t.Errorf("bootstrap tokens no config named: %v (named: %s)", stray, fmt.Sprint(slices.Sorted(maps.Keys(named))))
		return
	}
	w.t.Logf("%d bootstrap tokens made by a provider in the workload cluster, each named by a config's spec", made)
}
