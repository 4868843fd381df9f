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

package scale

import (
	"bufio"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"
	capicerts "sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"
)

// Workload API servers: Cluster API's in-memory API server, in this process,
// as its ScaleSpec runs it: one mux, one listener (port) per workload
// cluster, each cluster's objects in a resource group of its own. The
// listener ports are taken from [workloadMinPort, workloadMaxPort), from
// SCALE_WORKLOAD_PORT (20000) on: below Linux's ephemeral ports (32768 and
// up), so that no client's own port is taken for a listener's, and counted
// as one.
const workloadHost = "127.0.0.1"

var workloadMinPort, workloadMaxPort = workloadPorts()

func workloadPorts() (int32, int32) {
	low := int64(20000)
	if v := os.Getenv("SCALE_WORKLOAD_PORT"); v != "" {
		if p, err := strconv.ParseInt(v, 10, 32); err == nil && p > 1024 && p < 55000 {
			low = p
		}
	}
	return int32(low), int32(low + 10000)
}

// workloadServers serves every workload cluster of a scale run. All
// clusters share one set of cluster certificates (generated once: making
// four CAs per cluster would spend minutes of RSA key generation on what
// only a control-plane provider does, once per cluster), so one admin
// kubeconfig, its server rewritten, reaches each of them.
type workloadServers struct {
	manager inmemoryruntime.Manager
	mux     *inmemoryserver.WorkloadClustersMux
	certs   secret.Certificates
	caCert  *x509.Certificate
	caKey   *rsa.PrivateKey
	admin   []byte // admin kubeconfig for the first cluster; see kubeconfigFor

	mu       sync.Mutex
	clusters map[string]int32 // listener name -> port
}

func newWorkloadServers(ctx context.Context) (*workloadServers, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	m := inmemoryruntime.NewManager(scheme)
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	debugPort, err := process.FreeTCPPort()
	if err != nil {
		return nil, err
	}
	mux, err := inmemoryserver.NewWorkloadClustersMux(m, workloadHost, inmemoryserver.CustomPorts{MinPort: workloadMinPort, MaxPort: workloadMaxPort, DebugPort: int32(debugPort)})
	if err != nil {
		return nil, err
	}
	certs := secret.NewCertificatesForInitialControlPlane(&upstreambootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		return nil, err
	}
	ca := certs.GetByPurpose(secret.ClusterCA)
	caCert, err := capicerts.DecodeCertPEM(ca.KeyPair.Cert)
	if err != nil {
		return nil, err
	}
	caKey, err := capicerts.DecodePrivateKeyPEM(ca.KeyPair.Key)
	if err != nil {
		return nil, err
	}
	rsaKey, ok := caKey.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the cluster CA's key is a %T, the in-memory API server takes RSA", caKey)
	}
	cfg, err := kubeconfig.New("workload", "https://"+workloadHost+":1", caCert, rsaKey)
	if err != nil {
		return nil, err
	}
	admin, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, err
	}
	return &workloadServers{manager: m, mux: mux, certs: certs, caCert: caCert, caKey: rsaKey, admin: admin, clusters: map[string]int32{}}, nil
}

func (w *workloadServers) shutdown() { _ = w.mux.Shutdown(context.Background()) }

// ensure starts the API server of the workload cluster named name (a
// namespace-free name: both implementations' Clusters of one index reach the
// same workload cluster, one run after the other) and returns its port.
func (w *workloadServers) ensure(ctx context.Context, name string) (int32, error) {
	w.mu.Lock()
	port, ok := w.clusters[name]
	w.mu.Unlock()
	if ok {
		return port, nil
	}
	w.manager.AddResourceGroup(name)
	rg := w.manager.GetResourceGroup(name).GetClient()
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespacePublic, metav1.NamespaceSystem} {
		if err := rg.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, err
		}
	}
	l, err := w.mux.InitWorkloadClusterListener(name, 0)
	if err != nil {
		return 0, err
	}
	if err := w.mux.RegisterResourceGroup(name, name); err != nil {
		return 0, err
	}
	if err := w.mux.AddAPIServer(name, "kube-apiserver-"+name, w.caCert, w.caKey); err != nil {
		return 0, err
	}
	w.mu.Lock()
	w.clusters[name] = l.Port()
	w.mu.Unlock()
	return l.Port(), nil
}

// kubeconfigFor is the admin kubeconfig with its server at port.
func (w *workloadServers) kubeconfigFor(port int32) ([]byte, error) {
	cfg, err := clientcmd.Load(w.admin)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + net.JoinHostPort(workloadHost, strconv.Itoa(int(port)))
	}
	return clientcmd.Write(*cfg)
}

// removeTokens deletes every bootstrap token of the named workload clusters
// (in process, not through the API), so that each run starts from none.
func (w *workloadServers) removeTokens(ctx context.Context, names []string) (int, error) {
	removed := 0
	for _, name := range names {
		rg := w.manager.GetResourceGroup(name).GetClient()
		list := &corev1.SecretList{}
		if err := rg.List(ctx, list, client.InNamespace(metav1.NamespaceSystem)); err != nil {
			return removed, err
		}
		for i := range list.Items {
			if list.Items[i].Type != bootstrapapi.SecretTypeBootstrapToken {
				continue
			}
			if err := rg.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				return removed, err
			}
			removed++
		}
	}
	return removed, nil
}

// tokens counts the bootstrap tokens in the named workload clusters.
func (w *workloadServers) tokens(ctx context.Context, names []string) (int, error) {
	n := 0
	for _, name := range names {
		list := &corev1.SecretList{}
		if err := w.manager.GetResourceGroup(name).GetClient().List(ctx, list, client.InNamespace(metav1.NamespaceSystem)); err != nil {
			return n, err
		}
		for _, s := range list.Items {
			if s.Type == bootstrapapi.SecretTypeBootstrapToken {
				n++
			}
		}
	}
	return n, nil
}

// requests sums the in-memory API servers' request counter by verb and
// resource ("create secrets"), over every workload cluster.
func requests() (map[string]float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "inmemory_apiserver_request_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			key := strings.ToLower(labels["verb"]) + " " + labels["resource"]
			if labels["subresource"] != "" {
				key += "/" + labels["subresource"]
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

// connectionsToWorkloads counts the established TCP connections into the
// workload listeners' port range: the connections the manager under
// measurement holds open to workload clusters (it is the only client then).
func connectionsToWorkloads() (int, error) {
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			return 0, err
		}
		s := bufio.NewScanner(file)
		s.Scan() // header
		for s.Scan() {
			fields := strings.Fields(s.Text())
			if len(fields) < 4 || fields[3] != "01" { // 01: ESTABLISHED
				continue
			}
			local := fields[1]
			i := strings.LastIndexByte(local, ':')
			port, err := strconv.ParseInt(local[i+1:], 16, 32)
			if err == nil && port >= int64(workloadMinPort) && port < int64(workloadMaxPort) {
				n++
			}
		}
		file.Close()
		if err := s.Err(); err != nil {
			return 0, err
		}
	}
	return n, nil
}
