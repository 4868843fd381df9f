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

// Package workload is what an e2e scenario does with a live workload
// cluster and what it checks of it, grouped by subject: machines and
// clusters, nodes, KubeadmControlPlane, ClusterClass, MachinePools, tokens
// and data secrets, clusterctl move. The objects it creates are built by
// package objects; the scenarios are the Test functions of test/e2e.
package workload

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// Cluster is one workload cluster of a test, in its own namespace,
// with the checks a test makes of it. Its methods fail the test on error.
type Cluster struct {
	// Namespace and Name name the cluster and the namespace it lives in.
	Namespace, Name string
	// Objects builds the cluster's objects; Create creates them.
	Objects objects.Cluster
	t       testing.TB
	stack   *stack.Stack
	c       client.Client
	// mgmt is the management cluster its objects are in (c is its client).
	mgmt *stack.Management
}

// ClusterInput says how NewCluster makes a workload cluster.
type ClusterInput struct {
	// Stack is the e2e stack the test package shares (Run starts it).
	Stack *stack.Stack
	// Management is the management cluster the cluster is made in; the
	// stack's own when nil.
	Management *stack.Management
	// Name names the cluster and its namespace.
	Name string
	// Version is the Kubernetes version of its machines
	// (objects.KubernetesVersion when empty).
	Version string
	// Objects are the objects made first; Cluster.Base (namespace,
	// infrastructure, Cluster) when nil.
	Objects func(*Cluster) []client.Object
}

// NewCluster makes a workload cluster from its first objects; it is
// deleted, with everything in its namespace, when the test ends.
func NewCluster(t testing.TB, in ClusterInput) *Cluster {
	t.Helper()
	if in.Management == nil {
		in.Management = in.Stack.Management
	}
	if in.Objects == nil {
		in.Objects = func(w *Cluster) []client.Object { return w.Objects.Base() }
	}
	w := &Cluster{Namespace: in.Name, Name: in.Name, Objects: objects.Cluster{Namespace: in.Name, Name: in.Name, Version: in.Version}, t: t, stack: in.Stack}
	w.MoveTo(in.Management)
	w.Create(in.Objects(w)...)
	t.Cleanup(w.Delete)
	t.Cleanup(func() {
		// E2E_PAUSE_ON_FAILURE=10m keeps a failed test's cluster for that
		// long, to look at it (the logs say where its kubeconfig is).
		if d, err := time.ParseDuration(os.Getenv("E2E_PAUSE_ON_FAILURE")); err == nil && t.Failed() {
			t.Logf("paused for %s: management kubeconfig %s, workload kubeconfig %s", d, w.mgmt.Kubeconfig, w.KubeconfigFile())
			time.Sleep(d)
		}
	})
	return w
}

// Client is the client of the management cluster the cluster's objects are in.
func (w *Cluster) Client() client.Client { return w.c }

// Management is the management cluster the cluster's objects are in.
func (w *Cluster) Management() *stack.Management { return w.mgmt }

// Create makes objects in the management cluster.
func (w *Cluster) Create(objects ...client.Object) {
	w.t.Helper()
	for _, o := range objects {
		if err := w.c.Create(context.Background(), o); err != nil {
			w.t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// AddControlPlaneMachine adds a control-plane Machine of the given format.
func (w *Cluster) AddControlPlaneMachine(name string, format bootstrapv1.Format, mutate ...func(*bootstrapv1.KubeadmConfigSpec)) {
	w.t.Helper()
	w.Create(w.Objects.ControlPlaneMachine(name, format, mutate...)...)
}

// OnHost runs a command on a Machine's host (the SimulatedMachine of that
// name) and returns its output.
func (w *Cluster) OnHost(machine string, args ...string) string {
	w.t.Helper()
	out, err := w.TryOnHost(machine, args...)
	if err != nil {
		w.t.Fatalf("on %s: %s: %v\n%s", machine, strings.Join(args, " "), err, out)
	}
	return out
}

// TryOnHost is OnHost for a command that may fail: its output and error.
func (w *Cluster) TryOnHost(machine string, args ...string) (string, error) {
	w.t.Helper()
	h := w.stack.Lab.Host(w.Namespace + "/" + machine)
	if h == nil {
		w.t.Fatalf("no host for machine %s", machine)
	}
	out, err := h.Exec(args...)
	return string(out), err
}

// AddMachineDeployment adds a MachineDeployment of workers of the given format.
func (w *Cluster) AddMachineDeployment(name string, format bootstrapv1.Format, replicas int32, bootDelay time.Duration) {
	w.t.Helper()
	w.Create(w.Objects.Workers(name, format, replicas, bootDelay)...)
}

// Scale sets a MachineDeployment's replicas.
func (w *Cluster) Scale(name string, replicas int32) {
	w.t.Helper()
	md := &clusterv1.MachineDeployment{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.Namespace, Name: name}, md); err != nil {
		w.t.Fatal(err)
	}
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To(replicas)
	if err := w.c.Patch(context.Background(), md, patch); err != nil {
		w.t.Fatal(err)
	}
}

// WaitForMachines waits until exactly want Machines are Running with a node
// and their hosts finished running the bootstrap data (kubeadm succeeded and
// the success sentinel is there), logging the table when it changes.
func (w *Cluster) WaitForMachines(want int, timeout time.Duration) []clusterv1.Machine {
	w.t.Helper()
	w.WaitForMachinesIn(w.c, w.Namespace, want, timeout)
	var machines clusterv1.MachineList
	if err := w.c.List(context.Background(), &machines, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	return machines.Items
}

// WaitForMachinesIn is WaitForMachines for the Machines of a namespace of
// another management cluster, c: one this cluster runs, say.
func (w *Cluster) WaitForMachinesIn(c client.Client, namespace string, want int, timeout time.Duration) {
	w.t.Helper()
	last := ""
	w.WaitFor(timeout, fmt.Sprintf("%d machines done in %s", want, namespace), func() bool {
		rows := w.logTable(c, namespace, &last)
		return stack.CountDone(rows) == want && len(rows) == want
	})
}

// LogTable logs the Machines' table when it differs from *last.
func (w *Cluster) LogTable(last *string) []stack.MachineRow {
	w.t.Helper()
	return w.logTable(w.c, w.Namespace, last)
}

func (w *Cluster) logTable(c client.Client, namespace string, last *string) []stack.MachineRow {
	w.t.Helper()
	rows, err := stack.MachineTable(context.Background(), c, namespace)
	if err != nil {
		return nil
	}
	var b strings.Builder
	stack.WriteTable(&b, rows)
	if s := b.String(); s != *last {
		title := w.Name + " machines"
		if c != w.c {
			title = "machines in " + namespace + " of another management cluster"
		}
		w.t.Logf("%s:\n%s", title, s)
		*last = s
	}
	return rows
}

// WorkloadClient reads the cluster's admin kubeconfig (written by Cluster
// API's cluster controller) and connects to the workload API server.
func (w *Cluster) WorkloadClient() kubernetes.Interface {
	w.t.Helper()
	cs, err := kubernetes.NewForConfig(w.RestConfig())
	if err != nil {
		w.t.Fatal(err)
	}
	return cs
}

// RestConfig reaches the workload cluster as its admin.
func (w *Cluster) RestConfig() *rest.Config {
	w.t.Helper()
	secret := &corev1.Secret{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.Namespace, Name: w.Name + "-kubeconfig"}, secret); err != nil {
		w.t.Fatalf("workload kubeconfig: %v", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		w.t.Fatal(err)
	}
	return cfg
}

// ExpectNodes checks the workload cluster has exactly the machines' Nodes
// besides those of MachinePool instances, matched by provider ID, each a
// real node (ExpectRealNodes), and returns them.
func (w *Cluster) ExpectNodes(machines []clusterv1.Machine) []corev1.Node {
	w.t.Helper()
	w.ExpectRealNodes(machines)
	list, err := w.WorkloadClient().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatalf("listing workload nodes: %v", err)
	}
	pools := w.PoolProviderIDs()
	var nodes []corev1.Node
	byProviderID := map[string]string{}
	for _, n := range list.Items {
		if !pools[n.Spec.ProviderID] {
			nodes = append(nodes, n)
			byProviderID[n.Spec.ProviderID] = n.Name
		}
	}
	if len(nodes) != len(machines) {
		w.t.Errorf("workload cluster has %d nodes besides pools', want %d", len(nodes), len(machines))
	}
	for _, m := range machines {
		if node, ok := byProviderID[m.Spec.ProviderID]; !ok || node != m.Status.NodeRef.Name {
			w.t.Errorf("machine %s (providerID %s): node %q, nodeRef %q", m.Name, m.Spec.ProviderID, node, m.Status.NodeRef.Name)
		}
	}
	return nodes
}

// ManagedTokens returns the bootstrap tokens this provider created and still
// keeps in the workload cluster.
func (w *Cluster) ManagedTokens() []string {
	w.t.Helper()
	secrets, err := w.WorkloadClient().CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{
		LabelSelector: bootstrapv1.BootstrapTokenConfigUIDLabel})
	if err != nil {
		w.t.Fatalf("listing workload bootstrap tokens: %v", err)
	}
	var names []string
	for _, s := range secrets.Items {
		names = append(names, s.Name)
	}
	return names
}

// DataSecrets returns the bootstrap data secrets of the namespace, and the
// secrets owned by a KubeadmConfig that is gone.
func (w *Cluster) DataSecrets() (all, orphaned []string) {
	w.t.Helper()
	var secrets corev1.SecretList
	if err := w.c.List(context.Background(), &secrets, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Type != clusterv1.ClusterSecretType || len(s.OwnerReferences) == 0 || s.OwnerReferences[0].Kind != "KubeadmConfig" {
			continue
		}
		// A config's data secret has its name (a pool's, its revision's); the
		// cluster's CA secrets are owned by the first control plane's config too.
		if isDataSecretOf(s.Name, s.OwnerReferences[0].Name) {
			all = append(all, s.Name)
		}
		err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.Namespace, Name: s.OwnerReferences[0].Name}, &bootstrapv1.KubeadmConfig{})
		if apierrors.IsNotFound(err) {
			orphaned = append(orphaned, s.Name)
		}
	}
	return all, orphaned
}

// Delete deletes the Cluster and waits until Cluster API removed every
// Machine and host.
func (w *Cluster) Delete() {
	ctx := context.Background()
	_ = w.c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}})
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var machines clusterv1.MachineList
		if err := w.c.List(ctx, &machines, client.InNamespace(w.Namespace)); err == nil && len(machines.Items) == 0 {
			break
		}
		time.Sleep(2 * time.Second)
	}
	_ = w.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.Namespace}})
}

// DumpLogs prints where the logs are and the tail of each host's log.
func (w *Cluster) DumpLogs() {
	w.t.Helper()
	w.t.Logf("logs: %s (the provider's manager and cluster-api.log), %s/hosts/%s/*", w.mgmt.Dir(), w.stack.StateDir(), w.Namespace)
	for _, f := range []string{w.mgmt.ManagerLog()} {
		if b, err := os.ReadFile(f); err == nil {
			w.t.Logf("tail of %s:\n%s", f, tail(b, 40))
		}
	}
}

func tail(b []byte, lines int) string {
	s := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(s) > lines {
		s = s[len(s)-lines:]
	}
	return strings.Join(s, "\n")
}

// ExpectConsumers checks that each machine's data is of one of formats and
// was run by that format's consumer.
func (w *Cluster) ExpectConsumers(formats ...bootstrapv1.Format) {
	w.t.Helper()
	rows, err := stack.MachineTable(context.Background(), w.c, w.Namespace)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, r := range rows {
		switch {
		case !slices.Contains(formats, r.Format):
			w.t.Errorf("machine %s: data of format %q, want one of %v", r.Machine, r.Format, formats)
		case r.Consumer != host.ConsumerName(r.Format):
			w.t.Errorf("machine %s (%s): data run by %q, want %q", r.Machine, r.Format, r.Consumer, host.ConsumerName(r.Format))
		}
	}
}

// ExpectNothingLeftBehind waits until the namespace holds exactly one data
// secret per machine, none orphaned, and the workload cluster no bootstrap
// token of this provider (used tokens are deleted once machines joined).
func (w *Cluster) ExpectNothingLeftBehind(machines int) {
	w.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		all, orphaned := w.DataSecrets()
		tokens := w.ManagedTokens()
		if len(all) == machines && len(orphaned) == 0 && len(tokens) == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("after 2m: %d data secrets for %d machines (orphaned: %v), bootstrap tokens still in the workload cluster: %v",
				len(all), machines, orphaned, tokens)
		}
		time.Sleep(2 * time.Second)
	}
}

// WaitFor polls cond every 2s until it holds; details, if given, say what
// was still missing when it gives up.
func (w *Cluster) WaitFor(timeout time.Duration, what string, cond func() bool, details ...func() string) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			w.DumpLogs()
			var missing []string
			for _, d := range details {
				missing = append(missing, d())
			}
			w.t.Fatalf("%s: not done after %s\n%s", what, timeout, strings.Join(missing, "\n"))
		}
		time.Sleep(2 * time.Second)
	}
}

func objectKey(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}

// WorkerData returns each worker Machine's bootstrap data (format and value).
func (w *Cluster) WorkerData() map[string]string {
	w.t.Helper()
	ctx := context.Background()
	var machines clusterv1.MachineList
	if err := w.c.List(ctx, &machines, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range machines.Items {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp || m.Spec.Bootstrap.DataSecretName == nil {
			continue
		}
		s := &corev1.Secret{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: *m.Spec.Bootstrap.DataSecretName}, s); err == nil {
			out[m.Name] = string(s.Data["format"]) + "\n" + string(s.Data["value"])
		}
	}
	return out
}

// ExpectGzipped checks that the data a machine ran (its spec had
// gzipUserData) is compressed the way its consumer reads it.
func (w *Cluster) ExpectGzipped(machine string, compressed func([]byte) bool) {
	w.t.Helper()
	s := &corev1.Secret{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.Namespace, Name: machine}, s); err != nil {
		w.t.Fatal(err)
	}
	if !compressed(s.Data["value"]) {
		w.t.Errorf("%s: its %s data is not compressed (%d bytes)", machine, s.Data["format"], len(s.Data["value"]))
	}
}

// ExpectEachAPIServerWithItsEtcd checks there are want control-plane Nodes and
// that the API server on each answers with a healthy etcd (its own member):
// kube-apiserver talks to the etcd on 127.0.0.1 of its host. A member that
// joined last may still be catching up, so each gets a while to say so.
func (w *Cluster) ExpectEachAPIServerWithItsEtcd(want int) {
	w.t.Helper()
	cs := w.WorkloadClient()
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		w.t.Fatal(err)
	}
	if len(nodes.Items) != want {
		w.t.Fatalf("%d control-plane nodes, want %d", len(nodes.Items), want)
	}
	// kubeadm join --control-plane only succeeds once its etcd member joined
	// and its API server is healthy; each API server must answer on its own address.
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			cfg := rest.CopyConfig(w.RestConfig())
			cfg.Host = "https://" + a.Address + ":6443"
			c, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				w.t.Fatal(err)
			}
			if body, err := etcdReady(c, apiServerEtcdWait); err != nil {
				w.t.Errorf("API server on %s (node %s): readyz %v\n%s", a.Address, n.Name, err, body)
			}
		}
	}
}

// apiServerEtcdWait bounds how long an API server may report its etcd not
// ready: a member that just joined or was replaced syncs first.
const apiServerEtcdWait = 2 * time.Minute

// etcdReady asks an API server's /readyz until it reports etcd ok, and
// returns its last answer when it does not within timeout.
func etcdReady(c kubernetes.Interface, timeout time.Duration) ([]byte, error) {
	var body []byte
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		body, last = c.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "true").DoRaw(ctx)
		return last == nil && strings.Contains(string(body), "[+]etcd ok"), nil
	})
	if err != nil && last != nil {
		err = last
	}
	return body, err
}
