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

// Command cainjector is cert-manager's CA injector: it copies the CA of a
// Certificate (or of a Secret) into the webhook configurations, API services
// and CRD conversion webhooks annotated for it. It takes the flags
// cert-manager's Helm chart passes to its cainjector.
package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/cert-manager/cert-manager/internal/apis/config/cainjector"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/cainjector/scheme"
	"github.com/cert-manager/cert-manager/internal/kube"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/cainjector/v1alpha1"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/util"

	"github.com/cert-manager/cert-manager/cabpkformats/internal/command"
)

func main() {
	cfg, err := defaults()
	if err != nil {
		panic(err)
	}
	fs := pflag.NewFlagSet("cainjector", pflag.ExitOnError)
	fs.StringVar(&cfg.KubeConfig, "kubeconfig", cfg.KubeConfig, "kubeconfig of the API server (in a Pod: its service account)")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "inject only into objects of this namespace (default: every namespace)")
	command.LeaderElectionFlags(fs, &cfg.LeaderElectionConfig)
	fs.StringVar(&cfg.MetricsListenAddress, "metrics-listen-address", cfg.MetricsListenAddress, "metrics address (0 turns metrics off)")
	command.Run("cainjector", fs, &cfg.Logging, func(ctx context.Context) error { return run(ctx, cfg) })
}

func defaults() (*config.CAInjectorConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	cfg := &config.CAInjectorConfiguration{}
	return cfg, command.Defaulted(scheme, &configv1alpha1.CAInjectorConfiguration{}, cfg)
}

func run(ctx context.Context, cfg *config.CAInjectorConfiguration) error {
	restConfig, err := restConfig(cfg.KubeConfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kscheme.AddToScheme, cmscheme.AddToScheme, apiext.AddToScheme, apireg.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	var namespaces map[string]cache.Config
	if cfg.Namespace != "" {
		namespaces = map[string]cache.Config{cfg.Namespace: {}}
	}
	le := cfg.LeaderElectionConfig
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		// The injector reads only the Secrets it injects from; caching every
		// Secret of the cluster would cost memory for nothing.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                le.Enabled,
		LeaderElectionNamespace:       le.Namespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &le.LeaseDuration,
		RenewDeadline:                 &le.RenewDeadline,
		RetryPeriod:                   &le.RetryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsListenAddress},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    cfg.Namespace,
		IgnoreNamespaces:             cfg.IgnoreNamespaces,
		EnableCertificatesDataSource: cfg.EnableDataSourceConfig.Certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   cfg.EnableInjectableConfig.MutatingWebhookConfigurations,
			cainjector.ValidatingWebhookConfigurationName: cfg.EnableInjectableConfig.ValidatingWebhookConfigurations,
			cainjector.APIServiceName:                     cfg.EnableInjectableConfig.APIServices,
			cainjector.CustomResourceDefinitionName:       cfg.EnableInjectableConfig.CustomResourceDefinitions,
		},
	})
	if err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	return mgr.Start(ctx)
}

// restConfig is the kubeconfig's, or the Pod's service account's without one.
func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := kube.BuildClientConfig("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return util.RestConfigWithUserAgent(cfg, "cainjector"), nil
}
