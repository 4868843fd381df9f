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

// Package manager assembles the simulated infrastructure provider's
// controller-runtime manager from its command-line flags, as a provider's
// Deployment runs it: the cloud's API URL, leader election, health probes,
// metrics (authenticated and authorized unless told otherwise) and the
// cluster cache its network controller reads workload clusters through.
package manager

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/remote"
	capiflags "sigs.k8s.io/cluster-api/util/flags"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/cloud"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/controllers"
)

// The secured metrics endpoint authenticates and authorizes its scrapers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

const (
	leaderElectionID = "simulated-infrastructure-manager-leader-election"
	controllerName   = "simulated-infrastructure-manager"
)

// Options are the manager's command-line settings.
type Options struct {
	cloudURL            string
	leaderElect         bool
	leaderElectionLease time.Duration
	leaderElectionRenew time.Duration
	leaderElectionRetry time.Duration
	leaderElectionNS    string
	healthAddr          string
	syncPeriod          time.Duration
	concurrency         int
	manager             capiflags.ManagerOptions
	logs                *logs.Options
}

func (o *Options) addFlags(fs *pflag.FlagSet) {
	logsv1.AddFlags(o.logs, fs)
	fs.StringVar(&o.cloudURL, "cloud-url", "", "Base URL of the simulated cloud's API, which hosts and load balancers are asked of (required).")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles at a time.")
	fs.DurationVar(&o.leaderElectionLease, "leader-elect-lease-duration", 15*time.Second, "How long a non-leader waits before taking over an unrenewed lease.")
	fs.DurationVar(&o.leaderElectionRenew, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying to renew its lease.")
	fs.DurationVar(&o.leaderElectionRetry, "leader-elect-retry-period", 2*time.Second, "How long to wait between leader-election attempts.")
	fs.StringVar(&o.leaderElectionNS, "leader-elect-namespace", "", "Namespace of the leader-election lease (default: the pod's namespace).")
	fs.StringVar(&o.healthAddr, "health-addr", ":9440", "Address the /healthz and /readyz endpoints bind to.")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Minute, "Minimum interval between full resyncs of watched objects.")
	fs.IntVar(&o.concurrency, "concurrency", 10, "Number of objects of each kind reconciled at the same time.")
	capiflags.AddManagerOptions(fs, &o.manager)
}

// ParseFlags parses the manager's command line.
func ParseFlags(args []string) (*Options, error) {
	opts := &Options{logs: logs.NewOptions()}
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	opts.addFlags(fs)
	fs.AddGoFlagSet(flag.CommandLine) // --kubeconfig, registered by controller-runtime
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return opts, opts.validate()
}

// validate refuses at start, naming the flag, what would otherwise fail at
// every reconcile.
func (o *Options) validate() error {
	if o.cloudURL == "" {
		return errors.New("--cloud-url is required: the simulated cloud's API is where hosts come from")
	}
	u, err := url.Parse(o.cloudURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--cloud-url must be an http(s) URL with a host, got %q", o.cloudURL)
	}
	if o.concurrency < 1 {
		return fmt.Errorf("--concurrency must be at least 1, got %d", o.concurrency)
	}
	return nil
}

// Run parses args and runs the manager until ctx ends.
func Run(ctx context.Context, args []string) error {
	opts, err := ParseFlags(args)
	if errors.Is(err, pflag.ErrHelp) {
		return nil // the usage is printed: asking for it is no failure
	}
	if err != nil {
		return err
	}
	if err := logsv1.ValidateAndApply(opts.logs, nil); err != nil {
		return fmt.Errorf("invalid logging flags: %w", err)
	}
	ctrl.SetLogger(klog.Background())
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := New(ctx, opts, restConfig)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting manager")
	return mgr.Start(ctx)
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// New builds the manager opts describe, against the management cluster
// restConfig reaches.
func New(ctx context.Context, opts *Options, restConfig *rest.Config) (ctrl.Manager, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = remote.DefaultClusterAPIUserAgent(controllerName)
	_, metricsOpts, err := capiflags.GetManagerOptions(opts.manager)
	if err != nil {
		return nil, fmt.Errorf("invalid flags: %w", err)
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                     scheme,
		LeaderElection:             opts.leaderElect,
		LeaderElectionID:           leaderElectionID,
		LeaderElectionNamespace:    opts.leaderElectionNS,
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              &opts.leaderElectionLease,
		RenewDeadline:              &opts.leaderElectionRenew,
		RetryPeriod:                &opts.leaderElectionRetry,
		HealthProbeBindAddress:     opts.healthAddr,
		Metrics:                    *metricsOpts,
		Cache:                      cache.Options{SyncPeriod: &opts.syncPeriod},
		// Bootstrap data and kubeconfigs are read when needed, not kept in
		// memory for every cluster.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, setupControllers(ctx, mgr, opts)
}

// setupControllers connects to the cloud and registers the provider's
// controllers, with the cluster cache the network controller needs.
func setupControllers(ctx context.Context, mgr ctrl.Manager, opts *Options) error {
	labCloud, err := cloud.NewClient(opts.cloudURL)
	if err != nil {
		return fmt.Errorf("--cloud-url: %w", err)
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetClient(),
		Client:       clustercache.ClientOptions{UserAgent: remote.DefaultClusterAPIUserAgent(controllerName)},
	}, controller.Options{MaxConcurrentReconciles: opts.concurrency})
	if err != nil {
		return fmt.Errorf("setting up the cluster cache: %w", err)
	}
	return controllers.SetupWithManager(mgr, controllers.Options{
		Cloud: labCloud, ClusterCache: clusterCache, Concurrency: opts.concurrency,
	})
}
