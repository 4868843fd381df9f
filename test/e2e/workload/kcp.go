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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
)

// KCPClusterInput says how NewKCPCluster makes a cluster.
type KCPClusterInput struct {
	Stack *stack.Stack
	Name  string
	// Replicas and Format are the KubeadmControlPlane's.
	Replicas int32
	Format   bootstrapv1.Format
}

// NewKCPCluster is NewCluster with a KubeadmControlPlane.
func NewKCPCluster(t testing.TB, in KCPClusterInput) *Cluster {
	t.Helper()
	return NewCluster(t, ClusterInput{Stack: in.Stack, Name: in.Name, Objects: func(w *Cluster) []client.Object { return w.Objects.KCPBase(in.Replicas, in.Format) }})
}

// KCP is the cluster's KubeadmControlPlane.
func (w *Cluster) KCP() *controlplanev1.KubeadmControlPlane {
	w.t.Helper()
	// The Cluster names it: a ClusterClass's topology names it itself.
	cluster := &clusterv1.Cluster{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, w.Name), cluster); err != nil {
		w.t.Fatal(err)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, cluster.Spec.ControlPlaneRef.Name), kcp); err != nil {
		w.t.Fatal(err)
	}
	return kcp
}

// ScaleKCP sets the KubeadmControlPlane's replicas.
func (w *Cluster) ScaleKCP(replicas int32) {
	w.t.Helper()
	kcp := w.KCP()
	patch := client.MergeFrom(kcp.DeepCopy())
	kcp.Spec.Replicas = ptr.To(replicas)
	if err := w.c.Patch(context.Background(), kcp, patch); err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("scaled KubeadmControlPlane %s to %d", kcp.Name, replicas)
}

// ExpectRendered checks that every control-plane Machine's data secret was
// rendered in format (its format key), while KCP's KubeadmConfigs keep the
// spec KCP wrote.
func (w *Cluster) ExpectRendered(format bootstrapv1.Format) {
	w.t.Helper()
	ctx := context.Background()
	var configs bootstrapv1.KubeadmConfigList
	if err := w.c.List(ctx, &configs, client.InNamespace(w.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	for _, cfg := range configs.Items {
		s := &corev1.Secret{}
		if err := w.c.Get(ctx, objectKey(w.Namespace, cfg.Status.DataSecretName), s); err != nil {
			w.t.Errorf("%s: data secret: %v", cfg.Name, err)
			continue
		}
		if got := bootstrapv1.Format(s.Data["format"]); got != format {
			w.t.Errorf("%s: rendered %q, want %q", cfg.Name, got, format)
		}
		if cfg.Spec.EffectiveFormat() != bootstrapv1.CloudConfig {
			w.t.Errorf("%s: spec.format %q: KCP's spec says cloud-config (the format comes from the annotation)", cfg.Name, cfg.Spec.Format)
		}
	}
}

// ExpectNoKCPRollout waits through several of Cluster API's resyncs and
// checks that KubeadmControlPlane considers every machine up to date and
// replaced none: what it wrote into each KubeadmConfig is still what it
// wants there, after this provider's admission and defaulting.
func (w *Cluster) ExpectNoKCPRollout(replicas int32, resyncs int) {
	w.t.Helper()
	names := func() []string {
		var machines clusterv1.MachineList
		if err := w.c.List(context.Background(), &machines, client.InNamespace(w.Namespace)); err != nil {
			w.t.Fatal(err)
		}
		var out []string
		for _, m := range machines.Items {
			out = append(out, m.Name)
			if c := conditions.Get(&m, clusterv1.MachineUpToDateCondition); c == nil || c.Status != metav1.ConditionTrue {
				w.t.Errorf("machine %s is not up to date for KubeadmControlPlane: %+v", m.Name, c)
			}
		}
		sort.Strings(out)
		return out
	}
	before := names()
	time.Sleep(time.Duration(resyncs)*stack.ClusterAPISyncPeriod + 5*time.Second)
	after := names()
	if !slices.Equal(before, after) {
		w.t.Errorf("KubeadmControlPlane replaced machines at steady state: %v, then %v", before, after)
	}
	kcp := w.KCP()
	if ptr.Deref(kcp.Status.UpToDateReplicas, 0) != replicas || ptr.Deref(kcp.Status.Replicas, 0) != replicas {
		w.t.Errorf("KubeadmControlPlane: %d replicas, %d up to date, want %d", ptr.Deref(kcp.Status.Replicas, 0), ptr.Deref(kcp.Status.UpToDateReplicas, 0), replicas)
	}
	w.t.Logf("no rollout over %d resyncs: %v", resyncs, after)
}

// ExpectRemediation makes one of the control plane's three hosts hang (its
// kubelet, etcd and API server stop), with a MachineHealthCheck of the control
// plane in place (what a ClusterClass's controlPlane.healthCheck creates):
// the node turns Unknown, the check marks its Machine, KubeadmControlPlane
// removes the Machine and its etcd member and joins a replacement rendered
// in format; the cluster ends with three nodes and three etcd members.
func (w *Cluster) ExpectRemediation(format bootstrapv1.Format, machines []clusterv1.Machine) {
	w.t.Helper()
	ctx := context.Background()
	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name + "-control-plane"},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: w.Name,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}},
			Checks: clusterv1.MachineHealthCheckChecks{
				NodeStartupTimeoutSeconds: ptr.To[int32](600),
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					// A hung host's node turns Unknown: caught at once. A
					// node that just joined is False until its pod network
					// is up, which under load takes longer than 10s: a
					// short False timeout remediates the replacement too.
					{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To[int32](10)},
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](300)},
				},
			},
		},
	}
	w.Create(mhc)
	w.WaitFor(time.Minute, "the MachineHealthCheck to see three healthy control-plane machines", func() bool {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(mhc), mhc); err != nil {
			w.t.Fatal(err)
		}
		return ptr.Deref(mhc.Status.ExpectedMachines, 0) == 3 && ptr.Deref(mhc.Status.CurrentHealthy, 0) == 3
	})

	before := map[string]bool{}
	for _, m := range machines {
		before[m.Name] = true
	}
	// The host hangs: its kubelet stops and its etcd and API server die with
	// nothing to restart them. (With only the kubelet stopped, a member that
	// still leads etcd would keep KCP from remediating: KCP first moves
	// leadership away, through the dead kubelet's port-forward.)
	victim := machines[len(machines)-1]
	stopped := time.Now()
	w.OnHost(victim.Spec.InfrastructureRef.Name, "sh", "-c",
		"/usr/local/sbin/systemctl stop kubelet && pkill -KILL -x etcd && pkill -KILL -x kube-apiserver")
	w.t.Logf("stopped the kubelet, etcd and the API server of %s", victim.Name)
	var marked time.Duration
	w.WaitFor(6*time.Minute, "KubeadmControlPlane to remove the unhealthy machine", func() bool {
		m := &clusterv1.Machine{}
		err := w.c.Get(ctx, objectKey(w.Namespace, victim.Name), m)
		if apierrors.IsNotFound(err) {
			return true
		}
		if err == nil && marked == 0 && conditions.IsFalse(m, clusterv1.MachineHealthCheckSucceededCondition) {
			marked = time.Since(stopped)
			w.t.Logf("%s marked unhealthy %s after its host hung: %s", victim.Name, marked.Round(time.Second),
				conditions.GetMessage(m, clusterv1.MachineHealthCheckSucceededCondition))
		}
		return false
	})
	w.t.Logf("%s removed %s after its host hung", victim.Name, time.Since(stopped).Round(time.Second))
	if marked == 0 {
		w.t.Errorf("%s went without being marked unhealthy by the MachineHealthCheck", victim.Name)
	}
	if got := w.KCP().Status.LastRemediation.Machine; got != victim.Name {
		w.t.Errorf("KubeadmControlPlane's last remediation names %q, want %q", got, victim.Name)
	}

	machines = w.WaitForMachines(3, 8*time.Minute)
	var replacements []string
	for _, m := range machines {
		if !before[m.Name] {
			replacements = append(replacements, m.Name)
		}
	}
	if len(replacements) != 1 {
		w.t.Errorf("machines after remediation %v: want exactly one new one", replacements)
	}
	w.ExpectNodes(machines)
	w.ExpectEtcdMembers()
	w.ExpectEachAPIServerWithItsEtcd(3)
	w.ExpectRendered(format)
	w.t.Logf("%s replaced by %v, %s after its host hung", victim.Name, replacements, time.Since(stopped).Round(time.Second))
	if err := w.c.Delete(ctx, mhc); err != nil {
		w.t.Fatal(err)
	}
}

// ExpectEtcdMembers checks that etcd's members are exactly the control-plane
// nodes, asking etcd itself (its members list, through its gRPC gateway on
// a control-plane host, with a client certificate from the cluster's etcd
// CA, as KubeadmControlPlane's own etcd client authenticates).
func (w *Cluster) ExpectEtcdMembers() {
	w.t.Helper()
	var want, got []string
	w.WaitFor(2*time.Minute, "etcd's members to be the control-plane nodes", func() bool {
		want = w.ControlPlaneNodes()
		var err error
		got, err = w.EtcdMembers(w.NodeAddress(want[0]))
		return err == nil && slices.Equal(got, want)
	}, func() string { return fmt.Sprintf("control-plane nodes %v, etcd members %v", want, got) })
	w.t.Logf("etcd members: %v", got)
}

// ControlPlaneNodes names the workload cluster's control-plane nodes.
func (w *Cluster) ControlPlaneNodes() []string {
	w.t.Helper()
	nodes, err := w.WorkloadClient().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		w.t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		w.t.Fatal("no control-plane node")
	}
	return names
}

// NodeAddress is a node's internal IP address.
func (w *Cluster) NodeAddress(node string) string {
	w.t.Helper()
	n, err := w.WorkloadClient().CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	w.t.Fatalf("node %s has no InternalIP", node)
	return ""
}

// EtcdMembers lists etcd's member names, asking the member at address.
func (w *Cluster) EtcdMembers(address string) ([]string, error) {
	w.t.Helper()
	ca := &corev1.Secret{}
	if err := w.c.Get(context.Background(), objectKey(w.Namespace, w.Name+"-etcd"), ca); err != nil {
		return nil, err
	}
	cert, err := clientCertificate(ca.Data["tls.crt"], ca.Data["tls.key"])
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.Data["tls.crt"])
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
	}}}
	resp, err := hc.Post("https://"+address+":2379/v3/cluster/member/list", "application/json", bytes.NewReader([]byte("{}")))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Members []struct {
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	var names []string
	for _, m := range list.Members {
		if m.Name != "" { // a member added but not started has no name yet
			names = append(names, m.Name)
		} else {
			names = append(names, "(unstarted)")
		}
	}
	sort.Strings(names)
	return names, nil
}

// clientCertificate signs a short-lived client certificate with a CA.
func clientCertificate(caCertPEM, caKeyPEM []byte) (tls.Certificate, error) {
	caPair, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	caCert, err := x509.ParseCertificate(caPair.Certificate[0])
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "e2e-etcd-client"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caPair.PrivateKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}
