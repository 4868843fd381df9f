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
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// With Options.RuntimeSDK, Cluster API's core and KubeadmControlPlane
// managers run as their release's binaries (built from the module) rather
// than in this process: the Runtime SDK client that calls extensions is
// internal to them. They call this provider's in-place update extension by
// its Service's name, as in a management cluster: the name resolves to
// loopback in their hosts file, this provider's manager serves its webhooks
// on the Service's port (443) with a certificate for that name, and the
// Secret cert-manager would write holds its CA for ExtensionConfigs that ask
// for it to be injected.

// ExtensionServiceName is the Service of this provider's webhooks and, with
// KubeadmInPlaceUpdates, its Runtime extension, in ProviderNamespace.
const ExtensionServiceName = "capi-kubeadm-bootstrap-webhook-service"

// extensionServicePort is the port of the Service a Runtime SDK client
// calls when an ExtensionConfig gives none.
const extensionServicePort = 443

// extensionServiceHost is the Service's name in cluster DNS.
const extensionServiceHost = ExtensionServiceName + "." + ProviderNamespace + ".svc"

// clusterAPIBinary is one of Cluster API's managers run as its binary.
type clusterAPIBinary struct {
	name, pkg string
	// webhooks is its webhook configurations' manifest in the module.
	webhooks string
}

// coreBinary is Cluster API's core manager, which calls UpdateMachine and,
// for MachineDeployments, CanUpdateMachineSet.
const coreBinary = "cluster-api-core"

var clusterAPIBinaries = []clusterAPIBinary{
	{coreBinary, "sigs.k8s.io/cluster-api/core", filepath.Join("core", "config", "webhook", "manifests.yaml")},
	{"cluster-api-kubeadm-control-plane", "sigs.k8s.io/cluster-api/controlplane/kubeadm", filepath.Join("controlplane", "kubeadm", "config", "webhook", "manifests.yaml")},
}

// clusterAPIBinaryGates are the stack's Cluster API gates (clusterAPIGates)
// with the Runtime SDK and in-place updates.
const clusterAPIBinaryGates = "--feature-gates=ClusterTopology=true,MachinePool=true,MachineTaintPropagation=true," +
	"KubeadmBootstrapFormatIgnition=true,RuntimeSDK=true,InPlaceUpdates=true"

// startClusterAPIBinaries builds and runs Cluster API's managers, each with
// its webhooks, and points its webhook configurations at it.
func (m *Management) startClusterAPIBinaries(ctx context.Context) error {
	hosts, err := m.writeHostsFile()
	if err != nil {
		return err
	}
	kubeconfig, err := m.env.AdminKubeconfig()
	if err != nil {
		return err
	}
	module, err := testenv.ClusterAPIModuleDir()
	if err != nil {
		return err
	}
	serving := m.env.Webhooks()
	for _, b := range clusterAPIBinaries {
		bin := filepath.Join(m.binDir, b.name)
		if _, err := os.Stat(bin); err != nil {
			m.progress(fmt.Sprintf("building Cluster API's %s manager (%s)", b.name, b.pkg))
			// The test module requires all they import (it runs their
			// reconcilers in process otherwise).
			if err := process.BuildIn(repodir.TestModule(), bin, b.pkg); err != nil {
				return err
			}
		}
		port, err := process.FreeTCPPort()
		if err != nil {
			return err
		}
		mgr, err := process.RunManager(process.ManagerOptions{
			Binary: bin, Name: b.name, Kubeconfig: kubeconfig, Dir: m.dir,
			WebhookCertDir: serving.CertDir, WebhookPort: port,
			Args: []string{clusterAPIBinaryGates, "--sync-period=" + ClusterAPISyncPeriod.String()},
			Wrap: process.HostsWrap(hosts),
		})
		if err != nil {
			return err
		}
		m.clusterAPIBinaries = append(m.clusterAPIBinaries, mgr)
		if err := testenv.WaitForTLS(net.JoinHostPort(serving.Host, strconv.Itoa(port)), time.Minute); err != nil {
			return fmt.Errorf("%s's webhooks: %w", b.name, err)
		}
		hooks := webhookServer{host: serving.Host, port: port, ca: serving.CAData}
		all := func(map[string]any) bool { return true }
		if err := installWebhookConfigurations(ctx, m.Client, filepath.Join(module, b.webhooks), hooks, b.name+"-", all); err != nil {
			return err
		}
	}
	return m.writeExtensionCA(ctx)
}

// writeHostsFile writes the machine's hosts file with the extension's
// Service name on loopback, for Cluster API's managers.
func (m *Management) writeHostsFile() (string, error) {
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return "", err
	}
	file := filepath.Join(m.dir, "cluster-api-hosts")
	hosts = append(hosts, fmt.Sprintf("\n127.0.0.1 %s\n", extensionServiceHost)...)
	return file, os.WriteFile(file, hosts, 0o644)
}

// writeExtensionCA writes the Secret cert-manager keeps for the webhook
// Service's certificate: an ExtensionConfig annotated to inject the CA from
// it trusts this provider's extension.
func (m *Management) writeExtensionCA(ctx context.Context) error {
	return m.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ProviderNamespace, Name: ExtensionServiceName + "-cert"},
		Data:       map[string][]byte{"ca.crt": m.env.Webhooks().CAData},
	})
}

// ClusterAPICoreLog is the log of Cluster API's core manager run as its
// binary (Options.RuntimeSDK): its errors name the extensions it calls.
func (m *Management) ClusterAPICoreLog() string { return filepath.Join(m.dir, coreBinary+".log") }

func (m *Management) stopClusterAPIBinaries() {
	for _, mgr := range m.clusterAPIBinaries {
		mgr.Stop()
	}
	m.clusterAPIBinaries = nil
}
