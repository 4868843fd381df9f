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

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configdefaults "github.com/cert-manager/cert-manager/internal/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/internal/pem"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	dnsutil "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// run serves /livez, waits to lead (when electing), then runs every enabled
// controller until ctx ends or one fails.
func run(ctx context.Context, cfg *config.ControllerConfiguration) error {
	// Cancelled on the way out, so that a controller that cannot be built
	// stops the health server and the election before run waits for them.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := logf.FromContext(ctx)
	factory, err := contextFactory(ctx, cfg)
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	limits := cfg.PEMSizeLimitsConfig
	pem.SetGlobalSizeLimits(pem.NewSizeLimitsFromConfig(limits.MaxCertificateSize, limits.MaxPrivateKeySize, limits.MaxChainLength, limits.MaxBundleSize))

	g, ctx := errgroup.WithContext(ctx)
	health := healthz.NewServer(cfg.LeaderElectionConfig.HealthzTimeout)
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HealthzListenAddress)
	if err != nil {
		return fmt.Errorf("listening on %s for /livez: %w", cfg.HealthzListenAddress, err)
	}
	g.Go(func() error { return health.Start(ctx, ln) })

	elected := make(chan struct{})
	if cfg.LeaderElectionConfig.Enabled {
		g.Go(func() error { return lead(ctx, cfg, factory, health, elected) })
	} else {
		close(elected)
	}
	select {
	case <-ctx.Done():
		return g.Wait()
	case <-elected:
	}

	enabled := enabledControllers(cfg)
	log.Info("starting controllers", "controllers", strings.Join(sets.List(enabled), ","))
	for name, construct := range controller.Known() {
		if !enabled.Has(name) {
			continue
		}
		c, err := construct(factory)
		if err != nil {
			cancel()
			return errors.Join(fmt.Errorf("controller %s: %w", name, err), g.Wait())
		}
		g.Go(func() error { return c.Run(cfg.NumberOfConcurrentWorkers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}

// enabledControllers reads --controllers as cert-manager does: '*' is the
// default set, 'name' adds one, '-name' leaves one out; none is '*'.
func enabledControllers(cfg *config.ControllerConfiguration) sets.Set[string] {
	enabled, disabled := sets.New[string](), sets.New[string]()
	for _, c := range cfg.Controllers {
		switch {
		case c == "*":
			enabled.Insert(configdefaults.DefaultEnabledControllers...)
		case strings.HasPrefix(c, "-"):
			disabled.Insert(strings.TrimPrefix(c, "-"))
		default:
			enabled.Insert(c)
		}
	}
	if len(cfg.Controllers) == 0 {
		enabled.Insert(configdefaults.DefaultEnabledControllers...)
	}
	// A controller scoped to one namespace runs no ClusterIssuers.
	if cfg.Namespace != "" {
		disabled.Insert(clusterissuers.ControllerName)
	}
	return enabled.Difference(disabled)
}

// lead takes part in the election on the controller's Lease and closes
// elected once it leads; losing the lead afterwards is an error, so that the
// Pod restarts as a follower.
func lead(ctx context.Context, cfg *config.ControllerConfiguration, factory *controller.ContextFactory, health *healthz.Server, elected chan struct{}) error {
	c, err := factory.Build("leader-election")
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	le := cfg.LeaderElectionConfig
	lock, err := resourcelock.NewWithLabels(resourcelock.LeasesResourceLock, le.Namespace, "cert-manager-controller",
		c.Client.CoreV1(), c.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "-external-cert-manager-controller", EventRecorder: c.Recorder},
		map[string]string{"app.kubernetes.io/managed-by": "cert-manager"})
	if err != nil {
		return fmt.Errorf("leader-election lock: %w", err)
	}
	lost := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		ReleaseOnCancel: true, WatchDog: health.LeaderHealthzAdaptor,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() { close(lost) },
		},
	})
	if err != nil {
		return err
	}
	elector.Run(ctx)
	select {
	case <-ctx.Done():
		return nil
	case <-lost:
		return errors.New("leader election lost")
	}
}

// contextFactory is what every controller is built from: clients, informer
// factories and the options of issuers, ACME and certificates.
func contextFactory(ctx context.Context, cfg *config.ControllerConfiguration) (*controller.ContextFactory, error) {
	http01 := cfg.ACMEHTTP01Config
	quantities := map[string]*resource.Quantity{}
	for flag, value := range map[string]string{
		"acme-http01-solver-resource-request-cpu":    http01.SolverResourceRequestCPU,
		"acme-http01-solver-resource-request-memory": http01.SolverResourceRequestMemory,
		"acme-http01-solver-resource-limits-cpu":     http01.SolverResourceLimitsCPU,
		"acme-http01-solver-resource-limits-memory":  http01.SolverResourceLimitsMemory,
	} {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		quantities[flag] = &q
	}
	nameservers := cfg.ACMEDNS01Config.RecursiveNameservers
	if len(nameservers) == 0 {
		nameservers = dnsutil.RecursiveNameservers
	}
	return controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         cfg.KubeConfig,
		APIServerHost:      cfg.APIServerHost,
		KubernetesAPIQPS:   cfg.KubernetesAPIQPS,
		KubernetesAPIBurst: cfg.KubernetesAPIBurst,
		Namespace:          cfg.Namespace,
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverImage:                 http01.SolverImage,
			HTTP01SolverResourceRequestCPU:    *quantities["acme-http01-solver-resource-request-cpu"],
			HTTP01SolverResourceRequestMemory: *quantities["acme-http01-solver-resource-request-memory"],
			HTTP01SolverResourceLimitsCPU:     *quantities["acme-http01-solver-resource-limits-cpu"],
			HTTP01SolverResourceLimitsMemory:  *quantities["acme-http01-solver-resource-limits-memory"],
			ACMEHTTP01SolverRunAsNonRoot:      http01.SolverRunAsNonRoot,
			HTTP01SolverNameservers:           http01.SolverNameservers,
			HTTP01SolverExtraLabels:           http01.SolverExtraLabels,
			HTTP01SolverRuntimeClassName:      http01.SolverRuntimeClassName,
			DNS01Nameservers:                  nameservers,
			DNS01CheckRetryPeriod:             cfg.ACMEDNS01Config.CheckRetryPeriod,
			DNS01CheckAuthoritative:           !cfg.ACMEDNS01Config.RecursiveNameserversOnly,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: cfg.MaxConcurrentChallenges},
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        cfg.ClusterResourceNamespace,
			ClusterIssuerAmbientCredentials: cfg.ClusterIssuerAmbientCredentials,
			IssuerAmbientCredentials:        cfg.IssuerAmbientCredentials,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerName:                 cfg.IngressShimConfig.DefaultIssuerName,
			DefaultIssuerKind:                 cfg.IngressShimConfig.DefaultIssuerKind,
			DefaultIssuerGroup:                cfg.IngressShimConfig.DefaultIssuerGroup,
			DefaultAutoCertificateAnnotations: cfg.IngressShimConfig.DefaultAutoCertificateAnnotations,
			ExtraCertificateAnnotations:       cfg.IngressShimConfig.ExtraCertificateAnnotations,
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           cfg.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes:                 cfg.CopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: cfg.CertificateRequestMinimumBackoffDuration,
			CertificateRequestMaximumBackoffDuration: cfg.CertificateRequestMaximumBackoffDuration,
		},
	})
}
