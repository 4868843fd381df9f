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

package management

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/workload"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// initBudget is how long clusterctl init may take, warm, until every
// provider is Available (issue #33).
const initBudget = 5 * time.Minute

// TestClusterctlInit makes a management cluster as users have one: a
// kubeadm cluster whose node boots from the management machine image (every
// provider's image in its store, no registry), initialised by clusterctl
// from the repository with cert-manager, Cluster API, KubeadmControlPlane,
// this provider and the simulated provider, each running as its Deployment
// says. This provider's webhooks then answer through their Service with
// cert-manager's certificate.
func TestClusterctlInit(t *testing.T) {
	w := managementCluster(t, "clusterctl-init")
	kubeconfig := w.KubeconfigFile()
	start := time.Now()
	initProviders(t, w, kubeconfig, clusterctlConfig(t), releases.OurVersion)
	took := time.Since(start)
	t.Logf("clusterctl init: every provider Available after %s", took.Round(time.Second))
	if took > initBudget {
		t.Errorf("clusterctl init took %s, over the %s budget", took.Round(time.Second), initBudget)
	}
	c := managementClient(t, w)
	expectProviderImages(t, c)
	expectWebhookRefusal(t, c)
	// The shipped manifests as installed; each step waits through the
	// cluster's helpers, which report on this test.
	expectSecuredMetrics(t, w)
	expectLeaderTakeover(t, w)
	expectStartFailureExplained(t, w)
}

// initProviders runs clusterctl init with every provider, the kubeadm
// bootstrap provider at bootstrapVersion (this one's or upstream's), and
// waits until each is Available.
func initProviders(t *testing.T, w *workload.Cluster, kubeconfig, config, bootstrapVersion string) {
	t.Helper()
	capi := testbin.Versions["CLUSTER_API_VERSION"]
	mustClusterctl(t, w, "init", "--kubeconfig", kubeconfig, "--config", config,
		"--core", "cluster-api:"+capi, "--bootstrap", "kubeadm:"+bootstrapVersion, "--control-plane", "kubeadm:"+capi,
		"--infrastructure", "simulated:"+releases.SimulatedVersion,
		"--wait-providers", "--wait-provider-timeout", "600")
}

// managementCluster boots a one-node kubeadm cluster from the management
// machine image. Its control-plane node keeps no taint, as a kind cluster's
// does in Cluster API's quick start, so cert-manager's Pods run there too.
func managementCluster(t *testing.T, name string) *workload.Cluster {
	t.Helper()
	w := workload.NewCluster(t, workload.ClusterInput{Stack: st, Name: name})
	objects := w.Objects.ControlPlaneMachine(name+"-cp-0", bootstrapv1.CloudConfig, func(s *bootstrapv1.KubeadmConfigSpec) {
		s.InitConfiguration.NodeRegistration.Taints = ptr.To([]corev1.Taint{})
	})
	for _, o := range objects {
		if sm, ok := o.(*infrav1.SimulatedMachine); ok {
			sm.Spec.Image = releases.MachineImage
		}
	}
	w.Create(objects...)
	w.ExpectNodes(w.WaitForMachines(1, 5*time.Minute))
	store := w.OnHost(name+"-cp-0", "ctr", "--namespace", "k8s.io", "images", "list", "--quiet")
	for _, i := range rel.Images {
		if !strings.Contains(store, i.Ref) {
			t.Fatalf("the node's image store lacks %s", i.Ref)
		}
	}
	return w
}

// clusterctlConfig writes the clusterctl configuration of the repository.
func clusterctlConfig(t *testing.T) string {
	t.Helper()
	b, err := rel.Config(st.Cloud.URL)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "clusterctl.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterctl runs Cluster API's clusterctl with a configuration directory of
// its own and no version check (nothing outside the lab is reachable), and
// returns what it printed on stdout; its stderr is in the error.
func clusterctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(testbin.MustPath(t, testbin.Clusterctl), args...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t.Logf("clusterctl %s", strings.Join(args, " "))
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return string(out), err
}

// mustClusterctl is clusterctl that ends the test when clusterctl fails,
// with an account of the providers' Pods.
func mustClusterctl(t *testing.T, w *workload.Cluster, args ...string) string {
	t.Helper()
	out, err := clusterctl(t, args...)
	if err != nil {
		t.Fatalf("clusterctl %s: %v\n%s\nwhy providers are not running:\n%s", args[0], err, out, whyNotRunning(w.WorkloadClient()))
	}
	return out
}

// providerNamespaces are where clusterctl init puts the providers.
var providerNamespaces = []string{"cert-manager", "capi-system", "capi-kubeadm-control-plane-system", ourNamespace, "simulated-system"}

// whyNotRunning says, for each provider Pod that is not ready, what its
// containers wait for, and the Warning events of the providers' namespaces:
// what a user reads in kubectl describe when a provider does not come up.
func whyNotRunning(cs kubernetes.Interface) string {
	ctx := context.Background()
	var b strings.Builder
	for _, ns := range providerNamespaces {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", ns, err)
			continue
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.ContainerStatuses {
				if w := c.State.Waiting; w != nil {
					fmt.Fprintf(&b, "pod %s/%s: %s waits: %s: %s\n", ns, p.Name, c.Name, w.Reason, w.Message)
				}
			}
		}
		events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
		if err != nil {
			continue
		}
		for _, e := range events.Items {
			fmt.Fprintf(&b, "event %s/%s %s: %s\n", ns, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return b.String()
}

// expectStartFailureExplained rolls the manager's Deployment to an image
// tag no node has and no registry serves: the new Pod cannot start, and
// what users read (its waiting reason, the events) names the image.
func expectStartFailureExplained(t *testing.T, w *workload.Cluster) {
	cs := w.WorkloadClient()
	ctx := context.Background()
	d, err := cs.AppsV1().Deployments(ourNamespace).Get(ctx, ourDeployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	missing := strings.TrimSuffix(releases.OurImage, releases.OurVersion) + "v0.0.0-missing"
	d.Spec.Template.Spec.Containers[0].Image = missing
	if _, err := cs.AppsV1().Deployments(ourNamespace).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var why string
	w.WaitFor(2*time.Minute, "the new Pod's failure to pull "+missing, func() bool {
		why = whyNotRunning(cs)
		return strings.Contains(why, missing) && (strings.Contains(why, "ErrImagePull") || strings.Contains(why, "ImagePullBackOff"))
	}, func() string { return why })
	t.Logf("why the manager does not start:\n%s", why)
}

func managementClient(t *testing.T, w *workload.Cluster) client.Client {
	t.Helper()
	c, err := client.New(w.RestConfig(), client.Options{Scheme: st.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// expectProviderImages: the Deployments of the providers built from this
// tree run the images the repository names, from the node's store.
func expectProviderImages(t *testing.T, c client.Client) {
	t.Helper()
	want := map[string]string{
		"capi-kubeadm-bootstrap-system/capi-kubeadm-bootstrap-controller-manager": releases.OurImage,
		"simulated-system/capsim-controller-manager":                              releases.SimulatedImage,
	}
	for key, image := range want {
		ns, name, _ := strings.Cut(key, "/")
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			t.Errorf("%s runs %s, want %s", key, got, image)
		}
	}
}

// expectWebhookRefusal: a KubeadmConfig with a field its format does not
// honour is refused by this provider's webhook, reached through its Service
// with cert-manager's certificate, naming the field.
func expectWebhookRefusal(t *testing.T, c client.Client) {
	t.Helper()
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "refused"},
		Spec: bootstrapv1.KubeadmConfigSpec{
			Format:   bootstrapv1.CloudConfig,
			Ignition: bootstrapv1.IgnitionSpec{Butane: bootstrapv1.ButaneConfig{AdditionalConfig: "variant: flatcar\nversion: 1.1.0"}},
		},
	}
	err := c.Create(context.Background(), cfg, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "spec.ignition") || !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("a cloud-config KubeadmConfig with spec.ignition: got %v, want a refusal naming the field", err)
	}
}

// Where this provider's manager runs, as its components name it.
const (
	ourNamespace  = "capi-kubeadm-bootstrap-system"
	ourDeployment = "capi-kubeadm-bootstrap-controller-manager"
	ourLease      = "kubeadm-bootstrap-manager-leader-election-capi"
)

// ourPods are the manager's Pods, running or not.
func ourPods(t *testing.T, cs kubernetes.Interface) []corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ourNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "cluster.x-k8s.io/provider=bootstrap-kubeadm"})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// expectSecuredMetrics scrapes the manager's metrics endpoint from its node
// as Prometheus would: refused without a token (401) and with a token whose
// ServiceAccount may not read /metrics (403); served to one that may, with
// the Go runtime's memory limit at the container's limit (GOMEMLIMIT from
// the Deployment's resourceFieldRef).
func expectSecuredMetrics(t *testing.T, w *workload.Cluster) {
	cs := w.WorkloadClient()
	pods := ourPods(t, cs)
	if len(pods) != 1 || pods[0].Status.PodIP == "" {
		t.Fatalf("want one running manager Pod, got %d", len(pods))
	}
	pod := pods[0]
	limit := pod.Spec.Containers[0].Resources.Limits.Memory().Value()
	url := "https://" + pod.Status.PodIP + ":8443/metrics"
	reader, stranger := serviceAccountToken(t, cs, "metrics-reader", true), serviceAccountToken(t, cs, "metrics-stranger", false)
	for _, tc := range []struct {
		name, token, code string
	}{
		{"no token", "", "401"},
		{"a token without the right", stranger, "403"},
		{"a token with the right", reader, "200"},
	} {
		code, body := scrape(t, w, pod.Spec.NodeName, url, tc.token)
		if code != tc.code {
			t.Errorf("%s: HTTP %s, want %s", tc.name, code, tc.code)
			continue
		}
		if tc.code == "200" {
			expectMemoryLimit(t, body, limit)
		}
	}
}

// scrape asks url from the node with curl, as a token's bearer.
func scrape(t *testing.T, w *workload.Cluster, node, url, token string) (code, body string) {
	t.Helper()
	args := []string{"curl", "-sk", "--max-time", "20", "-w", "\n%{http_code}", url}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	out := strings.TrimRight(w.OnHost(node, args...), "\n")
	i := strings.LastIndex(out, "\n")
	return out[i+1:], out[:max(i, 0)]
}

// expectMemoryLimit finds the Go runtime's memory limit among the metrics.
func expectMemoryLimit(t *testing.T, metrics string, limit int64) {
	t.Helper()
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, "go_gc_gomemlimit_bytes "); ok {
			got, err := strconv.ParseFloat(v, 64)
			if err != nil || int64(got) != limit {
				t.Errorf("the manager's memory limit is %s, want the container's %d (GOMEMLIMIT)", v, limit)
			}
			return
		}
	}
	t.Error("the metrics hold no go_gc_gomemlimit_bytes")
}

// serviceAccountToken makes a ServiceAccount in the default namespace, with
// the right to read /metrics when may, and returns a token of it.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, name string, may bool) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if may {
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: metav1.NamespaceDefault}},
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// expectLeaderTakeover runs the manager with two replicas, as an HA
// management cluster would, kills the leader's Pod, and waits until the
// other replica, or the Pod that replaces the killed one, holds the lease.
func expectLeaderTakeover(t *testing.T, w *workload.Cluster) {
	cs := w.WorkloadClient()
	ctx := context.Background()
	scale, err := cs.AppsV1().Deployments(ourNamespace).GetScale(ctx, ourDeployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 2
	if _, err := cs.AppsV1().Deployments(ourNamespace).UpdateScale(ctx, ourDeployment, scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.WaitFor(3*time.Minute, "two ready manager Pods", func() bool { return len(readyPods(ourPods(t, cs))) == 2 })
	leader := leaseHolder(t, cs)
	if !slices.Contains(readyPods(ourPods(t, cs)), leader) {
		t.Fatalf("the lease's holder %q is none of the ready Pods", leader)
	}
	start := time.Now()
	if err := cs.CoreV1().Pods(ourNamespace).Delete(ctx, leader, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	// The other replica or the Pod the Deployment starts in the killed
	// one's place: whichever asks first once the lease expires.
	var next string
	w.WaitFor(2*time.Minute, "another Pod to hold the lease", func() bool {
		next = leaseHolder(t, cs)
		return next != "" && next != leader
	})
	t.Logf("%s took the lease over %s after %s was killed", next, time.Since(start).Round(time.Second), leader)
}

func readyPods(pods []corev1.Pod) []string {
	var ready []string
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				ready = append(ready, p.Name)
			}
		}
	}
	return ready
}

// leaseHolder is the Pod that holds the manager's lease (client-go's
// identity is the Pod's name, an underscore and a UUID).
func leaseHolder(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	lease, err := cs.CoordinationV1().Leases(ourNamespace).Get(context.Background(), ourLease, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return pod
}
