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
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/cloud"
)

// controlPlaneStaticPods are the static pods kubeadm writes on a control plane.
var controlPlaneStaticPods = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// ExpectRealNodes waits until every Machine's Node is Ready by its kubelet's
// own report, with the addresses and provider ID its kubelet set, running
// containerd, with the mirror pods of its static pods Running and Ready,
// and kube-proxy Running on it; then checks each kubelet's running
// configuration for the kubeletExtraArgs value (--provider-id) and the
// kubeadm patch the specs' files wrote.
func (w *Cluster) ExpectRealNodes(machines []clusterv1.Machine) {
	w.t.Helper()
	cs := w.WorkloadClient()
	var problems []string
	w.WaitFor(3*time.Minute, "nodes Ready with their pods", func() bool {
		problems = w.NodeProblems(cs, machines)
		return len(problems) == 0
	}, func() string { return strings.Join(problems, "\n") })
	for _, m := range machines {
		w.ExpectKubeletConfig(cs, m)
	}
	w.LogDataToReady(cs, machines)
}

// LogDataToReady logs, per Machine, the time from its data secret to its
// Node's Ready condition (a measurement for docs/e2e.md, not a check).
func (w *Cluster) LogDataToReady(cs kubernetes.Interface, machines []clusterv1.Machine) {
	w.t.Helper()
	var lines []string
	for _, m := range machines {
		cfg := &bootstrapv1.KubeadmConfig{}
		if err := w.c.Get(context.Background(), objectKey(w.Namespace, m.Spec.Bootstrap.ConfigRef.Name), cfg); err != nil {
			continue
		}
		data := conditions.Get(cfg, "DataSecretAvailable")
		node, err := cs.CoreV1().Nodes().Get(context.Background(), m.Status.NodeRef.Name, metav1.GetOptions{})
		if err != nil || data == nil {
			continue
		}
		if ready := nodeCondition(node, corev1.NodeReady); ready != nil {
			role := "worker"
			if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
				role = "control plane"
			}
			lines = append(lines, fmt.Sprintf("%s (%s, %s): %s", m.Name, role, cfg.Spec.Format, ready.LastTransitionTime.Sub(data.LastTransitionTime.Time)))
		}
	}
	w.t.Logf("from bootstrap data to a Ready node:\n  %s", strings.Join(lines, "\n  "))
}

// NodeProblems lists what is not yet as a real node has it.
func (w *Cluster) NodeProblems(cs kubernetes.Interface, machines []clusterv1.Machine) []string {
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	dns := false
	for _, p := range pods.Items {
		if p.Labels["k8s-app"] == "kube-dns" && podReady(&p) {
			dns = true
		}
	}
	if !dns {
		problems = append(problems, "no CoreDNS pod Running and Ready")
	}
	for _, m := range machines {
		node, err := cs.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
		if err != nil {
			problems = append(problems, fmt.Sprintf("machine %s: node: %v", m.Name, err))
			continue
		}
		if ready := nodeCondition(node, corev1.NodeReady); ready == nil || ready.Status != corev1.ConditionTrue || ready.Reason != "KubeletReady" {
			problems = append(problems, fmt.Sprintf("node %s: not Ready by its kubelet: %+v", node.Name, ready))
		}
		if node.Spec.ProviderID != m.Spec.ProviderID {
			problems = append(problems, fmt.Sprintf("node %s: provider ID %q, machine's %q", node.Name, node.Spec.ProviderID, m.Spec.ProviderID))
		}
		if !hasAddress(node, corev1.NodeInternalIP, machineAddress(m)) {
			problems = append(problems, fmt.Sprintf("node %s: addresses %v, want InternalIP %s", node.Name, node.Status.Addresses, machineAddress(m)))
		}
		if !strings.HasPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") || node.Status.NodeInfo.KubeletVersion != m.Spec.Version {
			problems = append(problems, fmt.Sprintf("node %s: runtime %q, kubelet %q", node.Name, node.Status.NodeInfo.ContainerRuntimeVersion, node.Status.NodeInfo.KubeletVersion))
		}
		want := map[string]bool{}
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
			for _, p := range controlPlaneStaticPods {
				want[p+"-"+node.Name] = true
			}
		}
		proxy := false
		for _, p := range pods.Items {
			if p.Spec.NodeName != node.Name {
				continue
			}
			if strings.HasPrefix(p.Name, "kube-proxy-") && podReady(&p) {
				proxy = true
			}
			if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror && want[p.Name] {
				if podReady(&p) {
					delete(want, p.Name)
				}
			}
		}
		for p := range want {
			problems = append(problems, fmt.Sprintf("node %s: mirror pod %s not Running and Ready", node.Name, p))
		}
		if !proxy {
			problems = append(problems, fmt.Sprintf("node %s: no kube-proxy pod Running and Ready", node.Name))
		}
	}
	return problems
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasAddress(n *corev1.Node, t corev1.NodeAddressType, addr string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == t && a.Address == addr {
			return true
		}
	}
	return false
}

// machineAddress is the host's address the simulated provider reported.
func machineAddress(m clusterv1.Machine) string {
	for _, a := range m.Status.Addresses {
		if a.Type == clusterv1.MachineInternalIP {
			return a.Address
		}
	}
	return ""
}

// ExpectKubeletConfig reads the running kubelet's configuration through the
// API server's node proxy (/configz) and checks what the spec put there.
func (w *Cluster) ExpectKubeletConfig(cs kubernetes.Interface, m clusterv1.Machine) {
	w.t.Helper()
	kc, err := runningKubeletConfig(cs, m.Status.NodeRef.Name)
	if err != nil {
		w.t.Error(err)
		return
	}
	// --provider-id came from kubeletExtraArgs (kubeadm-flags.env), with
	// the instance-id placeholder filled by the format's consumer.
	if kc.ProviderID != m.Spec.ProviderID {
		w.t.Errorf("node %s: the kubelet runs with providerID %q, want %q (kubeletExtraArgs)", m.Status.NodeRef.Name, kc.ProviderID, m.Spec.ProviderID)
	}
	// kubeadm's default is systemd: cgroupfs and failCgroupV1 came from the
	// patch the spec's files wrote.
	if kc.CgroupDriver != "cgroupfs" || kc.FailCgroupV1 == nil || *kc.FailCgroupV1 {
		w.t.Errorf("node %s: the kubelet runs with cgroupDriver %q, failCgroupV1 %v: the kubeadm patch (%s) did not apply",
			m.Status.NodeRef.Name, kc.CgroupDriver, kc.FailCgroupV1, objects.KubeadmPatchesDir)
	}
}

// kubeletConfig is what the scenarios check of a running kubelet's
// configuration.
type kubeletConfig struct {
	ProviderID          string `json:"providerID"`
	CgroupDriver        string `json:"cgroupDriver"`
	FailCgroupV1        *bool  `json:"failCgroupV1"`
	ContainerLogMaxSize string `json:"containerLogMaxSize"`
	MaxPods             int32  `json:"maxPods"`
}

// runningKubeletConfig reads a node's running kubelet configuration through
// the API server's node proxy (/configz).
func runningKubeletConfig(cs kubernetes.Interface, node string) (kubeletConfig, error) {
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(context.Background())
	if err != nil {
		return kubeletConfig{}, fmt.Errorf("node %s: /configz: %w", node, err)
	}
	var configz struct {
		KubeletConfig kubeletConfig `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(body, &configz); err != nil {
		return kubeletConfig{}, fmt.Errorf("node %s: /configz: %w", node, err)
	}
	return configz.KubeletConfig, nil
}

// ExpectPodNetwork runs pods from the test image: a web server on one node
// and a client on a worker, which looks up a Service name through CoreDNS,
// fetches from the server pod's address on the other node, and asks the
// Lab's API about a host, as a provider's Pod asks its cloud. It then uses
// kubectl as a user would: logs, exec and port-forward through the workload
// API server.
func (w *Cluster) ExpectPodNetwork(serverNode, clientNode string) {
	w.t.Helper()
	ctx := context.Background()
	cs := w.WorkloadClient()
	images, err := testbin.LoadNodeImages()
	if err != nil {
		w.t.Fatal(err)
	}
	busybox, err := images.Image(testbin.TestImage)
	if err != nil {
		w.t.Fatal(err)
	}
	pod := func(name, node string, command ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{
				NodeName:      node,
				RestartPolicy: corev1.RestartPolicyNever,
				Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{
					Name: name, Image: busybox.Ref, ImagePullPolicy: corev1.PullNever, Command: command,
				}},
				TerminationGracePeriodSeconds: ptr.To[int64](1),
			},
		}
	}
	pods := cs.CoreV1().Pods(metav1.NamespaceDefault)
	server := pod("web", serverNode, "sh", "-c", "mkdir -p /www && echo hello-from-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www")
	if _, err := pods.Create(ctx, server, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	var serverIP string
	w.WaitFor(2*time.Minute, "the web pod running", func() bool {
		p, err := pods.Get(ctx, "web", metav1.GetOptions{})
		if err == nil && podReady(p) {
			serverIP = p.Status.PodIP
			return true
		}
		return false
	})
	cloudAPI, err := url.Parse(w.stack.Cloud.URL)
	if err != nil {
		w.t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	// busybox's nc, not its wget: Debian's static build of wget crashes.
	// Each step is tried for up to a minute, as Kubernetes' own network
	// tests poll: a new node's routes reach its peers a moment after it is
	// Ready.
	client := pod("client", clientNode, "sh", "-c",
		untilAnswered("nslookup kubernetes.default.svc.cluster.local", svc.Spec.ClusterIP)+
			" && "+untilAnswered("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 "+serverIP+" 8080", "hello-from-web")+
			" && "+untilAnswered("printf 'GET /v1/hosts?name=pod-network-check HTTP/1.0\\r\\n\\r\\n' | nc -w 5 "+cloudAPI.Hostname()+" "+cloudAPI.Port(), "pod-network-check"))
	phase, logs := w.RunPod(client)
	w.t.Logf("client pod on %s (%s):\n%s", clientNode, phase, logs)
	if phase != corev1.PodSucceeded {
		w.t.Errorf("the client pod on %s failed: DNS through CoreDNS, the web pod on %s (%s) or the Lab's API not reachable", clientNode, serverNode, serverIP)
		w.logPodRoutes(serverNode, clientNode)
	}
	// CoreDNS answered with the kubernetes Service's cluster IP.
	if !strings.Contains(logs, svc.Spec.ClusterIP) {
		w.t.Errorf("nslookup from %s did not return the kubernetes Service's address %s", clientNode, svc.Spec.ClusterIP)
	}
	if !strings.Contains(logs, "hello-from-web") {
		w.t.Errorf("the client pod on %s did not get the web pod's page from %s", clientNode, serverIP)
	}
	// The API's own answer for a host it does not have.
	if !strings.Contains(logs, "pod-network-check: "+cloud.ErrNoHost.Error()) {
		w.t.Errorf("the client pod on %s got no answer from the Lab's API at %s", clientNode, cloudAPI.Host)
	}
	if out := w.Kubectl("exec", "web", "--", "cat", "/www/index.html"); !strings.Contains(out, "hello-from-web") {
		w.t.Errorf("kubectl exec into the web pod: %q", out)
	}
	w.ExpectPortForward("pod/web", 8080, "hello-from-web")
	for _, name := range []string{"web", "client"} {
		_ = pods.Delete(ctx, name, metav1.DeleteOptions{})
	}
}

// untilAnswered is a shell loop that runs command up to six times, five
// seconds apart, until its output contains want; it prints every attempt's
// output and fails if none had it.
func untilAnswered(command, want string) string {
	return fmt.Sprintf("(for i in 1 2 3 4 5 6; do out=$( { %s; } 2>&1); echo \"$out\"; "+
		"case \"$out\" in *%q*) exit 0;; esac; echo \"attempt $i: no %s yet\"; sleep 5; done; exit 1)", command, want, want)
}

// logPodRoutes logs what the hosts of two nodes route and forward, for a
// pod network check that failed.
func (w *Cluster) logPodRoutes(nodes ...string) {
	for _, node := range nodes {
		h := w.stack.Lab.Host(w.Namespace + "/" + node)
		if h == nil {
			w.t.Logf("no host for node %s", node)
			continue
		}
		out, err := h.Exec("sh", "-c", "ip route; ip -br addr; iptables -S FORWARD")
		w.t.Logf("host of %s (err %v):\n%s", node, err, out)
	}
}

// RunPod creates a Pod in the workload cluster and waits up to two minutes
// for it to finish; it returns how it ended and its logs.
func (w *Cluster) RunPod(pod *corev1.Pod) (corev1.PodPhase, string) {
	w.t.Helper()
	ctx := context.Background()
	pods := w.WorkloadClient().CoreV1().Pods(pod.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var phase corev1.PodPhase
	w.WaitFor(2*time.Minute, "the pod "+created.Name+" finishing", func() bool {
		p, err := pods.Get(ctx, created.Name, metav1.GetOptions{})
		if err == nil {
			phase = p.Status.Phase
		}
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed
	})
	return phase, w.Kubectl("logs", "--namespace", created.Namespace, created.Name)
}

// ExpectPortForward forwards a local port to a pod's through the workload
// API server (kubectl port-forward) and reads want from it over HTTP.
func (w *Cluster) ExpectPortForward(target string, port int, want string) {
	w.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		w.t.Fatal(err)
	}
	local := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(w.KubectlPath(), "--kubeconfig", w.KubeconfigFile(), "port-forward", target, fmt.Sprintf("%d:%d", local, port))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", local))
		if err == nil {
			b := make([]byte, 256)
			n, _ := resp.Body.Read(b)
			resp.Body.Close()
			body = string(b[:n])
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(body, want) {
		w.t.Errorf("kubectl port-forward %s: got %q, want %q\n%s", target, body, want, out.String())
	}
}

// Kubectl runs kubectl against the workload cluster and returns its output.
func (w *Cluster) Kubectl(args ...string) string {
	w.t.Helper()
	out, err := exec.Command(w.KubectlPath(), append([]string{"--kubeconfig", w.KubeconfigFile()}, args...)...).CombinedOutput()
	if err != nil {
		w.t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// KubectlPath is the kubectl the tool cache holds.
func (w *Cluster) KubectlPath() string {
	w.t.Helper()
	return testbin.MustPath(w.t, testbin.Kubectl)
}

// KubeconfigFile writes the workload cluster's admin kubeconfig (Cluster
// API's) to the state directory, once.
func (w *Cluster) KubeconfigFile() string {
	w.t.Helper()
	path := filepath.Join(w.stack.StateDir(), w.Namespace+".kubeconfig")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	secret := &corev1.Secret{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, w.Name+"-kubeconfig"), secret); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, secret.Data["value"], 0o600); err != nil {
		w.t.Fatal(err)
	}
	return path
}

// WorkerMachine returns the name of a worker Machine of a MachineDeployment.
func (w *Cluster) WorkerMachine(md string) clusterv1.Machine {
	w.t.Helper()
	var machines clusterv1.MachineList
	if err := w.c.List(context.Background(), &machines, client.InNamespace(w.Namespace),
		client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil || len(machines.Items) == 0 {
		w.t.Fatalf("no machine of MachineDeployment %s: %v", md, err)
	}
	return machines.Items[0]
}

// ExpectServicesRestarted kills the kubelet and then containerd on a node's
// host, as a crash would, and waits until the host's service manager
// restarted each (Restart=always) and the node is Ready again with its
// pods still running.
func (w *Cluster) ExpectServicesRestarted(m clusterv1.Machine) {
	w.t.Helper()
	cs := w.WorkloadClient()
	for _, svc := range []string{"kubelet", "containerd"} {
		// systemctl status exits non-zero for a service that is not active.
		status := func() string {
			return w.OnHost(m.Spec.InfrastructureRef.Name, "sh", "-c", "/usr/local/sbin/systemctl status "+svc+" || true")
		}
		before := status()
		w.OnHost(m.Spec.InfrastructureRef.Name, "pkill", "-KILL", "-x", svc)
		var now string
		w.WaitFor(time.Minute, svc+" restarted after a crash", func() bool {
			now = status()
			return now != before && strings.Contains(now, "Active: active")
		}, func() string { return now })
		w.t.Logf("%s on %s after kill -9:\n%s", svc, m.Name, now)
	}
	var problems []string
	w.WaitFor(2*time.Minute, "the node Ready again", func() bool {
		problems = w.NodeProblems(cs, []clusterv1.Machine{m})
		return len(problems) == 0
	}, func() string { return strings.Join(problems, "\n") })
}

// ExpectKubeletFailureVisible adds a worker whose kubelet cannot start (a
// flag the kubelet does not know, through kubeletExtraArgs) and waits until
// the kubelet's own error is on its SimulatedMachine and, through Cluster
// API, on its Machine, which gets no node. The MachineDeployment is removed
// afterwards.
func (w *Cluster) ExpectKubeletFailureVisible(format bootstrapv1.Format) {
	w.t.Helper()
	ctx := context.Background()
	const md = "bad-kubelet"
	tmpl := w.Objects.KubeadmConfigTemplate(md, format)
	nr := &tmpl.Spec.Template.Spec.JoinConfiguration.NodeRegistration
	nr.KubeletExtraArgs = append(nr.KubeletExtraArgs, upstreambootstrapv1.Arg{Name: "no-such-flag", Value: ptr.To("1")})
	w.Create(tmpl, w.Objects.SimulatedMachineTemplate(md, 0), w.Objects.MachineDeployment(md, md, md, 1))
	const want = "unknown flag: --no-such-flag"
	var seen string
	w.WaitFor(3*time.Minute, "the kubelet's error on the machine", func() bool {
		var machines clusterv1.MachineList
		if err := w.c.List(ctx, &machines, client.InNamespace(w.Namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil || len(machines.Items) != 1 {
			return false
		}
		m := machines.Items[0]
		sm := &infrav1.SimulatedMachine{}
		if err := w.c.Get(ctx, objectKey(w.Namespace, m.Spec.InfrastructureRef.Name), sm); err != nil {
			return false
		}
		seen = sm.Status.HostMessage
		infraReady := conditions.Get(&m, clusterv1.MachineInfrastructureReadyCondition)
		return strings.Contains(sm.Status.HostMessage, want) && !m.Status.NodeRef.IsDefined() &&
			infraReady != nil && infraReady.Status == metav1.ConditionFalse && strings.Contains(infraReady.Message, want)
	}, func() string { return "host message: " + seen })
	w.t.Logf("a worker with a bad kubelet flag: %s", seen)
	if err := w.c.Delete(ctx, &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: md}}); err != nil {
		w.t.Fatal(err)
	}
	w.WaitFor(3*time.Minute, "the bad worker gone", func() bool {
		var machines clusterv1.MachineList
		err := w.c.List(ctx, &machines, client.InNamespace(w.Namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md})
		return err == nil && len(machines.Items) == 0
	})
}
