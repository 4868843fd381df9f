package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// kubernetesVersion is the version of every machine: the version of the
// kubeadm and control-plane binaries hack/tools.sh builds.
const kubernetesVersion = "v1.36.3"

// noRuntime is what every spec of this suite adds: the simulated hosts have
// no container runtime and no kubelet binary, which kubeadm's preflight
// checks look for.
var noRuntime = upstreambootstrapv1.NodeRegistrationOptions{IgnorePreflightErrors: []string{"all"}}

// workloadCluster builds the objects of one workload cluster in its own namespace.
type workloadCluster struct {
	t         *testing.T
	c         client.Client
	namespace string
	name      string
}

func newWorkloadCluster(t *testing.T, name string) *workloadCluster {
	t.Helper()
	w := &workloadCluster{t: t, c: st.Client, namespace: name, name: name}
	w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	w.create(&infrav1.SimulatedCluster{ObjectMeta: w.meta(name)})
	w.create(&clusterv1.Cluster{
		ObjectMeta: w.meta(name),
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimulatedCluster", Name: name},
		},
	})
	t.Cleanup(w.delete)
	return w
}

func (w *workloadCluster) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: w.namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: w.name}}
}

func (w *workloadCluster) create(o client.Object) {
	w.t.Helper()
	if err := w.c.Create(context.Background(), o); err != nil {
		w.t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

// controlPlaneMachine adds a control-plane Machine whose KubeadmConfig has
// the given format; the first one inits, later ones join.
func (w *workloadCluster) controlPlaneMachine(name string, format bootstrapv1.Format) {
	w.t.Helper()
	w.create(&bootstrapv1.KubeadmConfig{ObjectMeta: w.meta(name), Spec: bootstrapv1.KubeadmConfigSpec{
		Format:            format,
		InitConfiguration: upstreambootstrapv1.InitConfiguration{NodeRegistration: noRuntime},
		JoinConfiguration: upstreambootstrapv1.JoinConfiguration{NodeRegistration: noRuntime, ControlPlane: &upstreambootstrapv1.JoinControlPlane{}},
	}})
	w.create(&infrav1.SimulatedMachine{ObjectMeta: w.meta(name)})
	m := &clusterv1.Machine{ObjectMeta: w.meta(name), Spec: w.machineSpec(
		clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name},
		clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimulatedMachine", Name: name},
	)}
	m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	w.create(m)
}

func (w *workloadCluster) machineSpec(bootstrap, infra clusterv1.ContractVersionedObjectReference) clusterv1.MachineSpec {
	return clusterv1.MachineSpec{
		ClusterName:       w.name,
		Version:           kubernetesVersion,
		Bootstrap:         clusterv1.Bootstrap{ConfigRef: bootstrap},
		InfrastructureRef: infra,
	}
}

// kubeadmConfigTemplate creates a worker template of the given format.
func (w *workloadCluster) kubeadmConfigTemplate(name string, format bootstrapv1.Format) *bootstrapv1.KubeadmConfigTemplate {
	return &bootstrapv1.KubeadmConfigTemplate{ObjectMeta: w.meta(name), Spec: bootstrapv1.KubeadmConfigTemplateSpec{
		Template: bootstrapv1.KubeadmConfigTemplateResource{Spec: bootstrapv1.KubeadmConfigSpec{
			Format:            format,
			JoinConfiguration: upstreambootstrapv1.JoinConfiguration{NodeRegistration: noRuntime},
		}},
	}}
}

// machineDeployment adds a MachineDeployment of workers of the given format.
func (w *workloadCluster) machineDeployment(name string, format bootstrapv1.Format, replicas int32, bootDelay time.Duration) {
	w.t.Helper()
	w.create(w.kubeadmConfigTemplate(name, format))
	smt := &infrav1.SimulatedMachineTemplate{ObjectMeta: w.meta(name)}
	if bootDelay > 0 {
		smt.Spec.Template.Spec.BootDelay = &metav1.Duration{Duration: bootDelay}
	}
	w.create(smt)
	labels := map[string]string{clusterv1.ClusterNameLabel: w.name, clusterv1.MachineDeploymentNameLabel: name}
	w.create(&clusterv1.MachineDeployment{ObjectMeta: w.meta(name), Spec: clusterv1.MachineDeploymentSpec{
		ClusterName: w.name,
		Replicas:    ptr.To(replicas),
		Selector:    metav1.LabelSelector{MatchLabels: labels},
		// What Cluster API's defaulting webhook (not served here) would set.
		Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
			Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			},
		}},
		Template: clusterv1.MachineTemplateSpec{
			ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
			Spec: w.machineSpec(
				clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: name},
				clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "SimulatedMachineTemplate", Name: name},
			),
		},
	}})
}

// scale sets a MachineDeployment's replicas.
func (w *workloadCluster) scale(name string, replicas int32) {
	w.t.Helper()
	md := &clusterv1.MachineDeployment{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.namespace, Name: name}, md); err != nil {
		w.t.Fatal(err)
	}
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To(replicas)
	if err := w.c.Patch(context.Background(), md, patch); err != nil {
		w.t.Fatal(err)
	}
}

// machineRow is one line of the progress table.
type machineRow struct {
	machine, format, phase, host, node string
	// bootstrap is why the machine has no bootstrap data yet.
	bootstrap string
}

func (w *workloadCluster) rows() ([]machineRow, []clusterv1.Machine) {
	ctx := context.Background()
	var machines clusterv1.MachineList
	if err := w.c.List(ctx, &machines, client.InNamespace(w.namespace)); err != nil {
		return nil, nil
	}
	var rows []machineRow
	for _, m := range machines.Items {
		r := machineRow{machine: m.Name, phase: m.Status.Phase}
		if m.Status.NodeRef.IsDefined() {
			r.node = m.Status.NodeRef.Name
		}
		cfg := &bootstrapv1.KubeadmConfig{}
		if w.c.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, cfg) == nil {
			r.format = string(cfg.Spec.Format)
			for _, c := range cfg.Status.Conditions {
				if c.Type == "DataSecretAvailable" && c.Status != metav1.ConditionTrue {
					r.bootstrap = c.Reason
				}
			}
		}
		sm := &infrav1.SimulatedMachine{}
		if w.c.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: m.Spec.InfrastructureRef.Name}, sm) == nil {
			r.host = string(sm.Status.HostPhase)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].machine < rows[j].machine })
	return rows, machines.Items
}

// waitForMachines waits until exactly want Machines are Running with a node
// and their hosts finished running the bootstrap data (kubeadm succeeded and
// the success sentinel is there), logging the table when it changes.
func (w *workloadCluster) waitForMachines(want int, timeout time.Duration) []clusterv1.Machine {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		rows, machines := w.rows()
		var b strings.Builder
		running := 0
		for _, r := range rows {
			fmt.Fprintf(&b, "  %-40s %-13s %-13s %-14s %-20s %s\n", r.machine, r.format, r.phase, r.host, r.node, r.bootstrap)
			if r.phase == string(clusterv1.MachinePhaseRunning) && r.node != "" && r.host == string(infrav1.HostBootstrapped) {
				running++
			}
		}
		if s := b.String(); s != last {
			w.t.Logf("%s machines (%d/%d running):\n%s", w.name, running, want, s)
			last = s
		}
		if running == want && len(rows) == want {
			return machines
		}
		if time.Now().After(deadline) {
			w.dumpLogs()
			w.t.Fatalf("%s: %d of %d machines running with a node after %s", w.name, running, want, timeout)
		}
		time.Sleep(2 * time.Second)
	}
}

// workloadClient reads the cluster's admin kubeconfig (written by Cluster
// API's cluster controller) and connects to the workload API server.
func (w *workloadCluster) workloadClient() kubernetes.Interface {
	w.t.Helper()
	secret := &corev1.Secret{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.namespace, Name: w.name + "-kubeconfig"}, secret); err != nil {
		w.t.Fatalf("workload kubeconfig: %v", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		w.t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return cs
}

// expectNodes checks the workload cluster has exactly the machines' Nodes,
// matched by provider ID, and returns them.
func (w *workloadCluster) expectNodes(machines []clusterv1.Machine) []corev1.Node {
	w.t.Helper()
	nodes, err := w.workloadClient().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatalf("listing workload nodes: %v", err)
	}
	byProviderID := map[string]string{}
	for _, n := range nodes.Items {
		byProviderID[n.Spec.ProviderID] = n.Name
	}
	if len(nodes.Items) != len(machines) {
		w.t.Errorf("workload cluster has %d nodes, want %d", len(nodes.Items), len(machines))
	}
	for _, m := range machines {
		if node, ok := byProviderID[m.Spec.ProviderID]; !ok || node != m.Status.NodeRef.Name {
			w.t.Errorf("machine %s (providerID %s): node %q, nodeRef %q", m.Name, m.Spec.ProviderID, node, m.Status.NodeRef.Name)
		}
	}
	return nodes.Items
}

// managedTokens returns the bootstrap tokens this provider created and still
// keeps in the workload cluster.
func (w *workloadCluster) managedTokens() []string {
	w.t.Helper()
	secrets, err := w.workloadClient().CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{
		LabelSelector: "bootstrap.cluster.x-k8s.io/kubeadm-config-uid"})
	if err != nil {
		w.t.Fatalf("listing workload bootstrap tokens: %v", err)
	}
	var names []string
	for _, s := range secrets.Items {
		names = append(names, s.Name)
	}
	return names
}

// dataSecrets returns the bootstrap data secrets of the namespace, and those
// whose KubeadmConfig is gone.
func (w *workloadCluster) dataSecrets() (all, orphaned []string) {
	w.t.Helper()
	var secrets corev1.SecretList
	if err := w.c.List(context.Background(), &secrets, client.InNamespace(w.namespace)); err != nil {
		w.t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Type != clusterv1.ClusterSecretType || len(s.OwnerReferences) == 0 || s.OwnerReferences[0].Kind != "KubeadmConfig" {
			continue
		}
		all = append(all, s.Name)
		err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.namespace, Name: s.OwnerReferences[0].Name}, &bootstrapv1.KubeadmConfig{})
		if apierrors.IsNotFound(err) {
			orphaned = append(orphaned, s.Name)
		}
	}
	return all, orphaned
}

// delete deletes the Cluster and waits until Cluster API removed every
// Machine and host.
func (w *workloadCluster) delete() {
	ctx := context.Background()
	_ = w.c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace, Name: w.name}})
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var machines clusterv1.MachineList
		if err := w.c.List(ctx, &machines, client.InNamespace(w.namespace)); err == nil && len(machines.Items) == 0 {
			break
		}
		time.Sleep(2 * time.Second)
	}
	_ = w.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace}})
}

// dumpLogs prints where the logs are and the tail of each host's log.
func (w *workloadCluster) dumpLogs() {
	w.t.Helper()
	w.t.Logf("logs: %s (manager.log, cluster-api.log, hosts/%s/*)", stateDir, w.namespace)
	for _, f := range []string{st.ManagerLog()} {
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
