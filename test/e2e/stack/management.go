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
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// Management is one management cluster: its API server and etcd (envtest)
// with Cluster API's, this provider's and the simulated provider's CRDs and
// webhooks, labelled as `clusterctl init` labels them; a garbage collector;
// a kubeadm bootstrap provider's manager (this one's at start); Cluster
// API's controllers; the simulated infrastructure provider's manager, which
// asks the stack's Lab for hosts over its API. Hosts and load balancers are
// keyed by namespace and name, so a cluster moved to another management
// cluster keeps them.
type Management struct {
	// Name names it in progress lines.
	Name   string
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme
	// Kubeconfig is the path of an admin kubeconfig of it.
	Kubeconfig string

	dir        string // its logs and kubeconfig
	binDir     string // binaries built once for the stack
	managerBin string
	// simulatedBin is the simulated provider's manager, run as simulated.
	simulatedBin string
	simulated    *process.Manager
	lab          *host.Lab
	// cloudURL is the Lab's API, which its simulated provider asks.
	cloudURL string
	progress func(string)
	// first is the management cluster whose Cluster API manager owns the
	// process-wide settings (controller-runtime's logger, Cluster API's
	// conversion version getter).
	first bool
	// runtimeSDK runs Cluster API's managers as binaries (Options.RuntimeSDK).
	runtimeSDK         bool
	clusterAPIBinaries []*process.Manager

	env *testenv.Environment
	// The bootstrap provider whose components are installed, served by
	// its manager's webhook server on webhookPort (manager is nil while a
	// swap has stopped it).
	manager     *process.Manager
	provider    Provider
	webhookPort int
	gc          *exec.Cmd
	// endpoint is the API server's address on the lab (publishEndpoint).
	endpoint    *host.Forward
	cancel      context.CancelFunc
	capiStopped chan struct{}
}

func (m *Management) start(ctx context.Context, managerArgs []string) error {
	var err error
	if m.first {
		if err := m.setProcessLogger(); err != nil {
			return err
		}
	}
	m.progress("starting the management API server and etcd (envtest)")
	simulatedCRDs := filepath.Join(testenv.RepoRoot(), "test", "infrastructure", "simulated", "config", "crd", "bases")
	envOpts := testenv.Options{WithWebhooks: true, WithClusterAPI: true, CRDDirs: []string{simulatedCRDs}}
	if m.runtimeSDK {
		envOpts.WebhookPort, envOpts.WebhookDNSName = extensionServicePort, extensionServiceHost
	}
	if m.env, err = testenv.NewEnvironment(envOpts); err != nil {
		return err
	}
	if err := infrav1.AddToScheme(m.env.Scheme); err != nil {
		return err
	}
	if err := m.env.Start(); err != nil {
		return err
	}
	m.Config, m.Client, m.Scheme = m.env.Config, m.env.Client, m.env.Scheme
	if m.Kubeconfig, err = m.env.WriteAdminKubeconfig(m.dir); err != nil {
		return err
	}
	if err := m.labelForClusterctl(ctx); err != nil {
		return err
	}
	if err := m.publishEndpoint(ctx); err != nil {
		return fmt.Errorf("the management cluster's endpoint on the lab: %w", err)
	}
	// The provider's namespace, as clusterctl makes it: the leader-election
	// lease lives there.
	if err := m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ProviderNamespace}}); err != nil {
		return err
	}

	m.progress("starting the management cluster's garbage collector (kube-controller-manager)")
	if err := m.startGarbageCollector(); err != nil {
		return err
	}

	m.progress("starting this provider's manager (its webhooks serve admission and conversion)")
	ours, err := m.OurProvider()
	if err != nil {
		return err
	}
	m.provider = ours // the environment installed its components
	m.webhookPort = m.env.Webhooks().Port
	if err := m.startManager(ours.With(managerArgs...), m.webhookPort); err != nil {
		return err
	}

	if m.runtimeSDK {
		m.progress("starting Cluster API's core and KubeadmControlPlane managers (binaries, Runtime SDK)")
		if err := m.startClusterAPIBinaries(ctx); err != nil {
			return err
		}
	} else {
		m.progress("starting Cluster API's core controllers")
		if err := m.startClusterAPI(ctx); err != nil {
			return err
		}
	}
	m.progress("starting the simulated infrastructure provider's manager")
	return m.startSimulated()
}

// simulatedRBAC is the simulated provider's generated RBAC, which its
// manager runs with.
var simulatedRBAC = filepath.Join("test", "infrastructure", "simulated", "config", "rbac")

// WebhookEndpoint is where this provider's manager serves its webhooks
// (and, with KubeadmInPlaceUpdates, Cluster API's Runtime hooks), and the
// certificate authority of its serving certificate.
func (m *Management) WebhookEndpoint() (address string, caData []byte) {
	w := m.env.Webhooks()
	return net.JoinHostPort(w.Host, strconv.Itoa(m.webhookPort)), w.CAData
}

// startSimulated runs the simulated provider's manager binary as its
// Deployment runs it, with exactly the rights its release grants, asking the
// Lab's API for hosts.
func (m *Management) startSimulated() error {
	kubeconfig, err := m.env.ProviderKubeconfig("simulated-manager", filepath.Join(testenv.RepoRoot(), simulatedRBAC))
	if err != nil {
		return err
	}
	m.simulated, err = process.RunManager(process.ManagerOptions{
		Binary: m.simulatedBin, Name: simulatedLog, Kubeconfig: kubeconfig, Dir: m.dir,
		Args: []string{"--cloud-url=" + m.cloudURL},
	})
	return err
}

// setProcessLogger sends what the process logs through controller-runtime's
// global logger (envtest, Cluster API's process-wide helpers) to Cluster
// API's log, before anything logs: controller-runtime complains, with a
// stack trace, about logging that waited 30 s for a logger.
func (m *Management) setProcessLogger() error {
	logFile, err := m.openLog(clusterAPILog)
	if err != nil {
		return err
	}
	ctrl.SetLogger(crzap.New(crzap.WriteTo(logFile), crzap.UseDevMode(false)))
	return nil
}

// labelForClusterctl labels every CRD as `clusterctl init` labels a
// provider's: `clusterctl move` moves the kinds of the CRDs so labelled, and
// Cluster API's e2e framework dumps the kinds of each provider's label.
func (m *Management) labelForClusterctl(ctx context.Context) error {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := m.Client.List(ctx, crds); err != nil {
		return err
	}
	for _, crd := range crds.Items {
		labels := map[string]string{"clusterctl.cluster.x-k8s.io": ""}
		if p, ok := providerLabels[crd.Spec.Group]; ok {
			labels[clusterv1.ProviderNameLabel] = p
		}
		if err := testenv.LabelCRDs(m.Config, []string{crd.Name}, labels); err != nil {
			return err
		}
	}
	return nil
}

// providerLabels name the provider of each API group, as clusterctl's
// manifest labels do (cluster.x-k8s.io/provider).
var providerLabels = map[string]string{
	"cluster.x-k8s.io":              "cluster-api",
	"addons.cluster.x-k8s.io":       "cluster-api",
	"ipam.cluster.x-k8s.io":         "cluster-api",
	"runtime.cluster.x-k8s.io":      "cluster-api",
	"bootstrap.cluster.x-k8s.io":    "bootstrap-kubeadm",
	"controlplane.cluster.x-k8s.io": "control-plane-kubeadm",
	infrav1.GroupVersion.Group:      "infrastructure-simulated",
}

// startManager runs p's manager against the management cluster, its webhook
// server on port, and waits until its webhooks answer.
func (m *Management) startManager(p Provider, port int) error {
	mgr, err := m.runManager(p, port)
	if err != nil {
		return err
	}
	m.manager, m.provider = mgr, p
	return m.waitForAdmission()
}

// runManager starts p's manager as its Deployment runs it, its webhook server
// on port.
func (m *Management) runManager(p Provider, port int) (*process.Manager, error) {
	o := process.ManagerOptions{
		Binary: p.binary, Name: p.Name, Kubeconfig: p.kubeconfig, Dir: m.dir,
		WebhookCertDir: m.env.Webhooks().CertDir, WebhookPort: port,
		Args: p.Args,
	}
	if p.leaderElection {
		o.Args = append(append([]string(nil), p.electionArgs...), p.Args...)
		o.Wrap = p.electionWrap
	}
	return process.RunManager(o)
}

// startGarbageCollector runs kube-controller-manager's garbage collector and
// namespace controllers against the management cluster, as a real one has:
// data secrets go with their KubeadmConfigs through owner references.
func (m *Management) startGarbageCollector() error {
	kcm, err := testbin.Path(testbin.KubeControllerManager)
	if err != nil {
		return err
	}
	logFile, err := m.openLog("management-controller-manager.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	m.gc = exec.Command(kcm, "--kubeconfig="+m.Kubeconfig, "--controllers=garbagecollector,namespace",
		"--leader-elect=false", "--secure-port=0")
	m.gc.Stdout, m.gc.Stderr = logFile, logFile
	m.gc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return m.gc.Start()
}

// RestartManager restarts this provider's manager with other extra flags
// (its components installed again if another provider's were).
func (m *Management) RestartManager(args ...string) error {
	ours, err := m.OurProvider()
	if err != nil {
		return err
	}
	return m.ReplaceProvider(ours.With(args...))
}

// KillManager kills this provider's manager, as when its node fails, and
// starts it again with the same flags.
func (m *Management) KillManager() error {
	p := m.provider
	if m.manager != nil {
		m.manager.Kill()
		m.manager = nil
	}
	return m.startManager(p, m.webhookPort)
}

func (m *Management) stopManager() {
	if m.manager != nil {
		m.manager.Stop()
		m.manager = nil
	}
}

// Stop stops what the management cluster runs and its API server: the
// workload clusters' hosts stay, as when a management cluster is lost.
func (m *Management) Stop() {
	if m.cancel != nil {
		m.cancel()
		<-m.capiStopped
		m.cancel = nil
	}
	m.stopClusterAPIBinaries()
	m.stopManager()
	if m.simulated != nil {
		m.simulated.Stop()
		m.simulated = nil
	}
	if m.gc != nil && m.gc.Process != nil {
		_ = m.gc.Process.Kill()
		_ = m.gc.Wait()
		m.gc = nil
	}
	if m.env != nil && m.env.Config != nil {
		_ = m.env.Stop()
		m.env = nil
	}
	if m.endpoint != nil {
		m.endpoint.Close()
		m.endpoint = nil
	}
}

const (
	clusterAPILog = "cluster-api.log"
	// simulatedLog names the simulated provider's manager and its log
	// (simulated.log).
	simulatedLog = "simulated"
)

// Dir is the directory of its logs and kubeconfig.
func (m *Management) Dir() string { return m.dir }

// ManagerLog is the path of the running manager's log.
func (m *Management) ManagerLog() string { return filepath.Join(m.dir, m.provider.Name+".log") }

// ClusterAPILog is the path of Cluster API's controllers' log (JSON lines).
func (m *Management) ClusterAPILog() string { return filepath.Join(m.dir, clusterAPILog) }

// openLog opens a log in the state directory for appending.
func (m *Management) openLog(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(m.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}
