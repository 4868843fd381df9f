// Package stack starts the whole e2e stack on this machine: a management API
// server (envtest) with Cluster API's and this provider's CRDs and webhooks,
// Cluster API v1.14's core reconcilers and the simulated infrastructure
// provider in this process, this provider's manager as its own process (the
// binary that ships, with its real flags), and a Lab of simulated hosts that
// run the bootstrap data. The e2e tests and the demo share it.
package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testenv"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// Options configure a Stack.
type Options struct {
	// StateDir receives logs and kubeconfigs; it must exist.
	StateDir string
	// ManagerArgs are extra flags for this provider's manager (feature gates,
	// --bootstrap-token-ttl).
	ManagerArgs []string
	// Progress, when set, receives one line per start-up step.
	Progress io.Writer
}

// Stack is a running management cluster with its controllers and a Lab.
type Stack struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme
	Lab    *host.Lab
	// Kubeconfig is an admin kubeconfig of the management cluster.
	Kubeconfig string

	opts       Options
	env        *testenv.Environment
	managerBin string
	// The bootstrap provider whose components are installed, served by
	// its manager's webhook server on webhookPort (manager is nil while a
	// swap has stopped it).
	manager     *testenv.Manager
	provider    Provider
	webhookPort int
	gc          *exec.Cmd
	cancel      context.CancelFunc
	capiStopped chan struct{}
}

// hostTools are the commands the hosts' image has in /usr/local/bin.
var hostTools = []string{testbin.Kubelet, testbin.Kubeadm, testbin.Kubectl, testbin.Ignition}

// hostPackages are what the hosts' image has from Debian's packages.
var hostPackages = []string{testbin.Containerd, testbin.Runc, testbin.CloudInit}

// labOptions finds what the hosts are made of: the tools, the packages and
// the node images with their containerd seed.
func labOptions(stateDir string) (host.LabOptions, error) {
	opts := host.LabOptions{StateDir: stateDir, Tools: map[string]string{}}
	for _, t := range hostTools {
		p, err := testbin.Path(t)
		if err != nil {
			return opts, err
		}
		opts.Tools[t] = p
	}
	for _, t := range hostPackages {
		if _, err := testbin.Path(t); err != nil {
			return opts, err
		}
	}
	images, err := testbin.LoadNodeImages()
	if err != nil {
		return opts, err
	}
	pause, err := images.Image("pause")
	if err != nil {
		return opts, err
	}
	opts.ContainerdSeed, opts.PauseImage = images.ContainerdSeed(), pause.Ref
	return opts, nil
}

// Start brings the stack up. Stop takes it down.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	s := &Stack{opts: opts}
	if err := s.start(ctx); err != nil {
		s.Stop() // whatever did start
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context) error {
	opts := s.opts
	labOpts, err := labOptions(filepath.Join(opts.StateDir, "hosts"))
	if err != nil {
		return err
	}

	s.progress("building the manager binary (bootstrap/kubeadm/cmd/manager)")
	s.managerBin = filepath.Join(opts.StateDir, "manager")
	if err := testenv.GoBuild(s.managerBin, "./bootstrap/kubeadm/cmd/manager"); err != nil {
		return err
	}

	s.progress("starting the management API server and etcd (envtest)")
	if s.env, err = testenv.NewEnvironment(testenv.Options{WithWebhooks: true, WithClusterAPI: true}); err != nil {
		return err
	}
	s.env.CRDDirectoryPaths = append(s.env.CRDDirectoryPaths, filepath.Join(testenv.RepoRoot(), "test", "infrastructure", "simulated", "config", "crd"))
	if err := infrav1.AddToScheme(s.env.Scheme); err != nil {
		return err
	}
	if err := apiextensionsv1.AddToScheme(s.env.Scheme); err != nil { // swapping providers replaces CRDs
		return err
	}
	if s.Config, err = s.env.Start(); err != nil {
		return err
	}
	s.Scheme = s.env.Scheme
	if s.Client, err = client.New(s.Config, client.Options{Scheme: s.Scheme}); err != nil {
		return err
	}
	if s.Kubeconfig, err = testenv.WriteAdminKubeconfig(s.env, opts.StateDir); err != nil {
		return err
	}
	// The provider's namespace, as clusterctl makes it: the leader-election
	// lease lives there.
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ProviderNamespace}}); err != nil {
		return err
	}

	s.progress("starting the management cluster's garbage collector (kube-controller-manager)")
	if err := s.startGarbageCollector(); err != nil {
		return err
	}

	s.progress("creating the simulated hosts' network")
	if err := os.MkdirAll(labOpts.StateDir, 0o755); err != nil {
		return err
	}
	if s.Lab, err = host.NewLab(labOpts); err != nil {
		return err
	}

	s.progress("starting this provider's manager (its webhooks serve admission and conversion)")
	ours, err := s.OurProvider()
	if err != nil {
		return err
	}
	s.provider = ours // the environment installed its components
	s.webhookPort = s.env.WebhookInstallOptions.LocalServingPort
	if err := s.startManager(ours.With(opts.ManagerArgs...), s.webhookPort); err != nil {
		return err
	}

	s.progress("starting Cluster API's core controllers and the simulated infrastructure provider")
	if err := s.startClusterAPI(ctx); err != nil {
		return err
	}
	return nil
}

func (s *Stack) progress(msg string) {
	if s.opts.Progress != nil {
		fmt.Fprintf(s.opts.Progress, "%s  %s\n", time.Now().Format("15:04:05"), msg)
	}
}

// startManager runs p's manager against the management cluster, its webhook
// server on port, and waits until its webhooks answer.
func (s *Stack) startManager(p Provider, port int) error {
	m, err := s.runManager(p, port)
	if err != nil {
		return err
	}
	s.manager, s.provider = m, p
	return s.waitForAdmission()
}

// runManager starts p's manager as its Deployment runs it, its webhook server
// on port.
func (s *Stack) runManager(p Provider, port int) (*testenv.Manager, error) {
	o := testenv.ManagerOptions{
		Binary: p.binary, Name: p.Name, Kubeconfig: p.kubeconfig, Dir: s.opts.StateDir,
		WebhookCertDir: s.env.WebhookInstallOptions.LocalServingCertDir, WebhookPort: port,
		Args: p.Args,
	}
	if p.leaderElection {
		o.Args = append(append([]string(nil), p.electionArgs...), p.Args...)
		o.Wrap = p.electionWrap
	}
	return testenv.RunManager(o)
}

// startGarbageCollector runs kube-controller-manager's garbage collector and
// namespace controllers against the management cluster, as a real one has:
// data secrets go with their KubeadmConfigs through owner references.
func (s *Stack) startGarbageCollector() error {
	kcm, err := testbin.Path(testbin.KubeControllerManager)
	if err != nil {
		return err
	}
	logFile, err := s.openLog("management-controller-manager.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	s.gc = exec.Command(kcm, "--kubeconfig="+s.Kubeconfig, "--controllers=garbagecollector,namespace",
		"--leader-elect=false", "--secure-port=0")
	s.gc.Stdout, s.gc.Stderr = logFile, logFile
	s.gc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return s.gc.Start()
}

// RestartManager restarts this provider's manager with other extra flags
// (its components installed again if another provider's were).
func (s *Stack) RestartManager(args ...string) error {
	ours, err := s.OurProvider()
	if err != nil {
		return err
	}
	return s.ReplaceProvider(ours.With(args...))
}

func (s *Stack) stopManager() {
	if s.manager != nil {
		s.manager.Stop()
		s.manager = nil
	}
}

// Stop stops everything the stack started: hosts, controllers, the manager,
// the API server.
func (s *Stack) Stop() {
	if s.Lab != nil {
		s.Lab.Close()
	}
	if s.cancel != nil {
		s.cancel()
		<-s.capiStopped
	}
	s.stopManager()
	if s.gc != nil && s.gc.Process != nil {
		_ = s.gc.Process.Kill()
		_ = s.gc.Wait()
	}
	if s.env != nil && s.env.Environment != nil {
		_ = s.env.Stop()
	}
}

const clusterAPILog = "cluster-api.log"

// ManagerLog is the path of the running manager's log.
func (s *Stack) ManagerLog() string { return filepath.Join(s.opts.StateDir, s.provider.Name+".log") }

// ClusterAPILog is the path of Cluster API's controllers' log (JSON lines).
func (s *Stack) ClusterAPILog() string { return filepath.Join(s.opts.StateDir, clusterAPILog) }

// openLog opens a log in the state directory for appending.
func (s *Stack) openLog(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(s.opts.StateDir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}
