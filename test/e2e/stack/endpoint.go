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

package stack

import (
	"context"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiServerPort is the port of a management cluster's endpoint on the lab,
// kubeadm's default.
const apiServerPort = 6443

// publishEndpoint makes the management API server reachable from the lab's
// hosts, on an address of the lab, and publishes that address in
// kube-public/cluster-info as kubeadm does for the clusters it makes: a
// kubeconfig with the server and its CA, no credentials, under the cluster
// name "". Cluster API's KCP remediation spec reads it there and has its
// control-plane machines call the API from their bootstrap commands.
func (m *Management) publishEndpoint(ctx context.Context) error {
	local, err := url.Parse(m.Config.Host)
	if err != nil {
		return fmt.Errorf("the management API server's address %q: %w", m.Config.Host, err)
	}
	if m.endpoint, err = m.lab.Forward("management/"+m.Name, apiServerPort, local.Host); err != nil {
		return err
	}
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters[""] = &clientcmdapi.Cluster{
		Server:                   "https://" + m.endpoint.Addr.String(),
		CertificateAuthorityData: m.Config.CAData,
	}
	data, err := clientcmd.Write(*kubeconfig)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespacePublic}}
	if err := m.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return m.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: metav1.NamespacePublic},
		Data:       map[string]string{"kubeconfig": string(data)},
	})
}
