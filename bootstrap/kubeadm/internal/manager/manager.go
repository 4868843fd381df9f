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

// Package manager assembles the provider's controller-runtime manager from
// command-line flags: health probes, metrics, leader election, the feature
// gates, the admission webhooks, the cluster cache for workload clusters and
// the KubeadmConfig controller.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/url"
	goruntime "runtime"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/server/routes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // enables --logging-format=json
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	capisetup "sigs.k8s.io/cluster-api/bootstrap/kubeadm/setup"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/crdmigrator"
	"sigs.k8s.io/cluster-api/controllers/remote"
	runtimeserver "sigs.k8s.io/cluster-api/exp/runtime/server"
	capifeature "sigs.k8s.io/cluster-api/feature"
	capiflags "sigs.k8s.io/cluster-api/util/flags"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/controllers/kubeadmconfig"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/nodeupdate"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/updateextension"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/webhooks"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/webhooks/conversion"
)

// The secured metrics endpoint authenticates and authorizes its scrapers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

const (
	// leaderElectionID is upstream's lease: the Deployment keeps upstream's
	// name, so a swap or rollback applied over it must never run both
	// managers' leaders at once.
	leaderElectionID = "kubeadm-bootstrap-manager-leader-election-capi"
	controllerName   = "cabpk-formats-manager"
)

// Options are the manager's command-line settings.
type Options struct {
	// ManyPerProcess lets a process build several managers one after another
	// (tests): controller-runtime otherwise refuses a second controller of the
	// same name, which would report the same metrics. Not a flag.
	ManyPerProcess bool

	leaderElect         bool
	leaderElectionLease time.Duration
	leaderElectionRenew time.Duration
	leaderElectionRetry time.Duration
	leaderElectionNS    string
	watchNamespace      string
	healthAddr          string
	profilerAddr        string
	contentionProfiling bool
	skipCRDMigration    []string
	syncPeriod          time.Duration
	restQPS             float32
	restBurst           int
	webhookPort         int
	webhookCertDir      string
	webhookCertName     string
	webhookKeyName      string
	watchFilter         string
	tokenTTL            time.Duration
	dataSizeLimit       int
	configConcurrency   int
	cacheConcurrency    int
	cacheClientQPS      float32
	cacheClientBurst    int
	nodeUpdateImage     string
	kubernetesBinaries  string
	manager             capiflags.ManagerOptions
	// gates are this manager's own feature gates (--feature-gates), so that
	// managers built in one process (tests) do not share them.
	gates featuregate.MutableFeatureGate
	logs  *logs.Options
}

func (o *Options) addFlags(fs *pflag.FlagSet) {
	logsv1.AddFlags(o.logs, fs)
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles at a time.")
	fs.DurationVar(&o.leaderElectionLease, "leader-elect-lease-duration", 15*time.Second, "How long a non-leader waits before taking over an unrenewed lease.")
	fs.DurationVar(&o.leaderElectionRenew, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying to renew its lease.")
	fs.DurationVar(&o.leaderElectionRetry, "leader-elect-retry-period", 2*time.Second, "How long to wait between leader-election attempts.")
	fs.StringVar(&o.leaderElectionNS, "leader-elect-namespace", "", "Namespace of the leader-election lease (default: the pod's namespace).")
	fs.StringVar(&o.watchNamespace, "namespace", "", "Only watch this namespace (default: all namespaces).")
	fs.StringVar(&o.healthAddr, "health-addr", ":9440", "Address the /healthz and /readyz endpoints bind to.")
	fs.StringVar(&o.profilerAddr, "profiler-address", "", "Address to serve pprof on (disabled when empty), e.g. localhost:6060.")
	fs.BoolVar(&o.contentionProfiling, "contention-profiling", false, "Record blocking events for the profiler (block profile).")
	fs.StringSliceVar(&o.skipCRDMigration, "skip-crd-migration-phases", nil,
		fmt.Sprintf("CRD migration phases to skip, of %s and %s.", crdmigrator.StorageVersionMigrationPhase, crdmigrator.CleanupManagedFieldsPhase))
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Minute, "Minimum interval between full resyncs of watched objects.")
	fs.Float32Var(&o.restQPS, "kube-api-qps", 100, "Queries per second allowed towards the management cluster's API server.")
	fs.IntVar(&o.restBurst, "kube-api-burst", 200, "Burst of queries allowed towards the management cluster's API server.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port the admission webhook server listens on.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs/", "Directory holding the webhook serving certificate and key.")
	fs.StringVar(&o.webhookCertName, "webhook-cert-name", "tls.crt", "File name of the webhook serving certificate.")
	fs.StringVar(&o.webhookKeyName, "webhook-key-name", "tls.key", "File name of the webhook serving key.")
	fs.StringVar(&o.watchFilter, "watch-filter", "", fmt.Sprintf("Only reconcile objects whose %s label has this value (default: all).", clusterv1.WatchLabel))
	fs.DurationVar(&o.tokenTTL, "bootstrap-token-ttl", kubeadmconfig.DefaultTokenTTL, "How long a bootstrap token is valid after it is created or extended; tokens of machines that have not joined are extended at half this time.")
	fs.IntVar(&o.dataSizeLimit, "bootstrap-data-size-limit", 0, "Warn (condition BootstrapDataSizeWithinLimit, event) on a KubeadmConfig whose bootstrap data is larger than this many bytes, e.g. 16384 for AWS EC2 user data; 0 disables the check. The data secret is written either way.")
	fs.IntVar(&o.configConcurrency, "kubeadmconfig-concurrency", 100, "Number of KubeadmConfigs reconciled at the same time.")
	fs.IntVar(&o.cacheConcurrency, "clustercache-concurrency", 100, "Number of workload clusters the cluster cache connects to at the same time.")
	fs.Float32Var(&o.cacheClientQPS, "clustercache-client-qps", 20, "Queries per second allowed towards each workload cluster's API server.")
	fs.IntVar(&o.cacheClientBurst, "clustercache-client-burst", 30, "Burst of queries allowed towards each workload cluster's API server.")
	fs.StringVar(&o.nodeUpdateImage, "node-update-image", "", "Image of the Pods that apply in-place updates on nodes (needed with the KubeadmInPlaceUpdates gate).")
	fs.StringVar(&o.kubernetesBinaries, "node-update-kubernetes-binaries", noBinaries, "URL of Kubernetes release binaries laid out as https://dl.k8s.io/release's, from which nodes updated in place get the kubeadm and kubelet of a new Kubernetes version; "+noBinaries+" or empty: Kubernetes versions do not change in place.")
	capiflags.AddManagerOptions(fs, &o.manager)
	o.gates.AddFlag(fs)
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		clusterv1.AddToScheme,
		bootstrapv1.AddToScheme,
		conversion.AddToScheme, // v1beta1, for the conversion webhook
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// ParseFlags parses the manager's command line. The shipped manifests' args are
// checked against it in tests, so a manifest cannot pass a flag the binary lacks.
func ParseFlags(args []string) (*Options, error) {
	opts := &Options{logs: logs.NewOptions(), gates: feature.NewFeatureGates()}
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	opts.addFlags(fs)
	fs.AddGoFlagSet(flag.CommandLine)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return opts, opts.validate()
}

// validate checks what the flag parser cannot: a refusal at start, naming the
// flag, instead of a controller that misbehaves later.
func (o *Options) validate() error {
	if o.tokenTTL <= 0 {
		return fmt.Errorf("--bootstrap-token-ttl must be positive, got %s", o.tokenTTL)
	}
	if o.dataSizeLimit < 0 {
		return fmt.Errorf("--bootstrap-data-size-limit must be 0 (off) or a number of bytes, got %d", o.dataSizeLimit)
	}
	if o.gates.Enabled(feature.ReconcilerRateLimiting) && !o.gates.Enabled(feature.PriorityQueue) {
		return fmt.Errorf("--feature-gates: %s needs %s", feature.ReconcilerRateLimiting, feature.PriorityQueue)
	}
	if o.gates.Enabled(feature.KubeadmInPlaceUpdates) && o.nodeUpdateImage == "" {
		return fmt.Errorf("--node-update-image is needed with --feature-gates=%s=true", feature.KubeadmInPlaceUpdates)
	}
	if err := checkBinariesURL(o.kubernetesBinaries); err != nil {
		return err
	}
	for _, p := range o.skipCRDMigration {
		if p != string(crdmigrator.StorageVersionMigrationPhase) && p != string(crdmigrator.CleanupManagedFieldsPhase) {
			return fmt.Errorf("--skip-crd-migration-phases: unknown phase %q (known: %s, %s)", p, crdmigrator.StorageVersionMigrationPhase, crdmigrator.CleanupManagedFieldsPhase)
		}
	}
	return checkVerbosity(o.logs)
}

// noBinaries names no source of Kubernetes binaries. The manifest needs a
// word: clusterctl takes an empty default for an unset variable.
const noBinaries = "none"

// binariesSource is the source of Kubernetes binaries nodes use, empty
// when there is none.
func (o *Options) binariesSource() string {
	if o.kubernetesBinaries == noBinaries {
		return ""
	}
	return o.kubernetesBinaries
}

// checkBinariesURL refuses a binaries source nodes could not use: an
// absolute http or https URL, or none.
func checkBinariesURL(raw string) error {
	if raw == "" || raw == noBinaries {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("--node-update-kubernetes-binaries must be an absolute http or https URL")
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
	mgr, err := New(ctx, opts, nil)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting manager")
	return mgr.Start(ctx)
}

// maxVerbosity is the highest log verbosity the manager accepts: from 8 on,
// client-go logs request and response bodies, which carry bootstrap tokens,
// CA keys and bootstrap data.
const maxVerbosity = 7

var errVerbosityTooHigh = fmt.Errorf("log verbosity above %d is refused: client-go would log API request and response bodies, which carry bootstrap tokens, keys and bootstrap data", maxVerbosity)

func checkVerbosity(o *logs.Options) error {
	if o.Verbosity > maxVerbosity {
		return errVerbosityTooHigh
	}
	for _, m := range o.VModule {
		if m.Verbosity > maxVerbosity {
			return errVerbosityTooHigh
		}
	}
	return nil
}

// verbosityEndpoint is the diagnostics server's log-level endpoint.
const verbosityEndpoint = "/debug/flags/v"

// diagnosticsOptions are Cluster API's TLS and diagnostics server options,
// with the log-level endpoint (PUT a number) held to the cap that applies at
// start: Cluster API's own sets any level.
func diagnosticsOptions(opts *Options) ([]func(*tls.Config), *metricsserver.Options, error) {
	tlsOpts, metricsOpts, err := capiflags.GetManagerOptions(opts.manager)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid flags: %w", err)
	}
	if _, ok := metricsOpts.ExtraHandlers[verbosityEndpoint]; ok {
		metricsOpts.ExtraHandlers[verbosityEndpoint] = routes.StringFlagPutHandler(cappedVerbositySetter)
	}
	return tlsOpts, metricsOpts, nil
}

// cappedVerbositySetter sets klog's verbosity as logs.GlogSetter does, but
// refuses levels above maxVerbosity.
func cappedVerbositySetter(val string) (string, error) {
	if v, err := strconv.ParseUint(val, 10, 32); err == nil && v > maxVerbosity {
		return "", errVerbosityTooHigh
	}
	return logs.GlogSetter(val)
}

// New builds the manager opts describe: webhooks, the cluster cache and the
// KubeadmConfig controller. restConfig nil means --kubeconfig or in-cluster.
// Tests build the same manager from the same flags with their own restConfig.
func New(ctx context.Context, opts *Options, restConfig *rest.Config) (ctrl.Manager, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	if restConfig == nil {
		if restConfig, err = ctrl.GetConfig(); err != nil {
			return nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
	}
	restConfig = rest.CopyConfig(restConfig)
	restConfig.QPS = opts.restQPS
	restConfig.Burst = opts.restBurst
	restConfig.UserAgent = remote.DefaultClusterAPIUserAgent(controllerName)

	// Cluster API's controller builder reads these two from its own gates.
	if err := capifeature.MutableGates.SetFromMap(map[string]bool{
		string(capifeature.PriorityQueue):          opts.gates.Enabled(feature.PriorityQueue),
		string(capifeature.ReconcilerRateLimiting): opts.gates.Enabled(feature.ReconcilerRateLimiting),
	}); err != nil {
		return nil, err
	}
	tlsOpts, metricsOpts, err := diagnosticsOptions(opts)
	if err != nil {
		return nil, err
	}

	webhookServer, err := newWebhookServer(opts, tlsOpts)
	if err != nil {
		return nil, err
	}

	// Upstream's cache layout: Secrets only with a cluster-name label and data
	// kept only for certificates; Secrets and ConfigMaps are read live unless a
	// caching client asks. The init lock's ConfigMaps are cached here too.
	cacheOpts := capisetup.ManagerCacheOptions(scheme, controllerName, opts.watchNamespace, opts.syncPeriod)
	hasCluster, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	cacheOpts.ByObject[&corev1.ConfigMap{}] = cache.ByObject{Label: labels.NewSelector().Add(*hasCluster)}

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
		PprofBindAddress:           opts.profilerAddr,
		Metrics:                    *metricsOpts,
		Cache:                      cacheOpts,
		Client:                     capisetup.ManagerClientOptions(),
		Controller: config.Controller{
			SkipNameValidation: ptr.To(opts.ManyPerProcess),
			UsePriorityQueue:   ptr.To(opts.gates.Enabled(feature.PriorityQueue)),
			// Large management clusters take longer than the default 2 minutes to list.
			CacheSyncTimeout: 5 * time.Minute,
		},
		WebhookServer: webhookServer,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}

	if opts.contentionProfiling {
		goruntime.SetBlockProfileRate(1)
	}
	if err := webhooks.SetupWithManager(mgr, opts.gates); err != nil {
		return nil, err
	}
	if err := setupCRDMigrator(ctx, mgr, opts); err != nil {
		return nil, err
	}
	clusterCache, err := setupController(ctx, mgr, opts)
	if err != nil {
		return nil, err
	}
	if err := setupInPlaceUpdates(mgr, opts, clusterCache); err != nil {
		return nil, err
	}

	// Live and ready once the webhook server serves: the API server needs it
	// for every KubeadmConfig write.
	if err := mgr.AddHealthzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, err
	}

	return mgr, nil
}

// newWebhookServer returns the server of the admission webhooks. With
// KubeadmInPlaceUpdates on, it is a Runtime extension server that serves the
// in-place update hooks too, on the same port and certificate: an
// ExtensionConfig names the webhook Service, as admission does.
func newWebhookServer(opts *Options, tlsOpts []func(*tls.Config)) (webhook.Server, error) {
	if !opts.gates.Enabled(feature.KubeadmInPlaceUpdates) {
		return webhook.NewServer(webhook.Options{
			Port:     opts.webhookPort,
			CertDir:  opts.webhookCertDir,
			CertName: opts.webhookCertName,
			KeyName:  opts.webhookKeyName,
			TLSOpts:  tlsOpts,
		}), nil
	}
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return nil, fmt.Errorf("building the Runtime hook catalog: %w", err)
	}
	s, err := runtimeserver.New(runtimeserver.Options{
		Port:     opts.webhookPort,
		CertDir:  opts.webhookCertDir,
		CertName: opts.webhookCertName,
		KeyName:  opts.webhookKeyName,
		TLSOpts:  tlsOpts,
		Catalog:  catalog,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the Runtime extension server: %w", err)
	}
	return s, nil
}

// setupInPlaceUpdates adds the in-place update hooks to the Runtime
// extension server, when KubeadmInPlaceUpdates made one.
func setupInPlaceUpdates(mgr ctrl.Manager, opts *Options, clusterCache clustercache.ClusterCache) error {
	s, ok := mgr.GetWebhookServer().(*runtimeserver.Server)
	if !ok {
		return nil
	}
	return updateextension.AddToServer(s, &updateextension.Handlers{
		Updater: &nodeupdate.Updater{
			Reader:       mgr.GetAPIReader(),
			ClusterCache: clusterCache,
			Runner:       nodeupdate.Runner{Image: opts.nodeUpdateImage},
			// Nodes fetch from it themselves; the manager never does.
			KubernetesBinaries: opts.binariesSource(),
		},
		Recorder: mgr.GetEventRecorder("kubeadm-in-place-update"),
	})
}

// The CRD migrator's rights: read CRDs, update this provider's (their
// storedVersions), and rewrite its objects in the storage version.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions;customresourcedefinitions/status,verbs=update;patch,resourceNames=kubeadmconfigs.bootstrap.cluster.x-k8s.io;kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs;kubeadmconfigtemplates,verbs=get;list;watch;patch;update

// setupCRDMigrator runs Cluster API's CRD migrator for this provider's
// kinds, as upstream's manager does: objects stored in an older version are
// rewritten in the storage version and the CRD's storedVersions trimmed, so
// that an older version can later be removed from the CRD.
func setupCRDMigrator(ctx context.Context, mgr ctrl.Manager, opts *Options) error {
	skip := make([]crdmigrator.Phase, 0, len(opts.skipCRDMigration))
	for _, p := range opts.skipCRDMigration {
		skip = append(skip, crdmigrator.Phase(p))
	}
	return (&crdmigrator.CRDMigrator{
		Client:                 mgr.GetClient(),
		APIReader:              mgr.GetAPIReader(),
		SkipCRDMigrationPhases: skip,
		Config: map[client.Object]crdmigrator.ByObjectConfig{
			&bootstrapv1.KubeadmConfig{}:         {UseCache: false, UseStatusForStorageVersionMigration: true},
			&bootstrapv1.KubeadmConfigTemplate{}: {UseCache: false},
		},
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 1})
}

// setupController starts the cluster cache (connections to workload clusters)
// and the KubeadmConfig controller.
func setupController(ctx context.Context, mgr ctrl.Manager, opts *Options) (clustercache.ClusterCache, error) {
	// Reads everything from the manager's cache, including the Secrets and
	// ConfigMaps the default client reads live (upstream's secret caching
	// client, with this manager's scheme so the init lock can read Machines).
	cachingClient, err := client.New(mgr.GetConfig(), client.Options{
		Scheme:     mgr.GetScheme(),
		HTTPClient: mgr.GetHTTPClient(),
		Cache:      &client.CacheOptions{Reader: mgr.GetCache()},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the caching client: %w", err)
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient:     cachingClient,
		Cache:            capisetup.ClusterCacheCacheOptions(),
		Client:           capisetup.ClusterCacheClientOptions(controllerName, opts.cacheClientQPS, opts.cacheClientBurst),
		WatchFilterValue: opts.watchFilter,
	}, controller.Options{MaxConcurrentReconciles: opts.cacheConcurrency})
	if err != nil {
		return nil, fmt.Errorf("setting up the cluster cache: %w", err)
	}
	r := &kubeadmconfig.Reconciler{
		Client:           mgr.GetClient(),
		CachingClient:    cachingClient,
		APIReader:        mgr.GetAPIReader(),
		ClusterCache:     clusterCache,
		Gates:            opts.gates,
		Recorder:         mgr.GetEventRecorder("kubeadmconfig-controller"),
		TokenTTL:         opts.tokenTTL,
		DataSizeLimit:    opts.dataSizeLimit,
		WatchFilterValue: opts.watchFilter,
	}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: opts.configConcurrency}); err != nil {
		return nil, fmt.Errorf("setting up the KubeadmConfig controller: %w", err)
	}
	return clusterCache, nil
}
