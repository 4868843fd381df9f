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

// Command controller is cert-manager's controller: issuers, certificates and
// certificate requests, as cert-manager's own controller binary runs them
// (every controller and issuer type it links, the same default set
// enabled). It takes the flags cert-manager's Helm chart passes to its
// controller.
package main

import (
	"context"

	"github.com/spf13/pflag"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/controller/scheme"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"

	"github.com/cert-manager/cert-manager/cabpkformats/internal/command"

	// The controllers and issuer types register themselves, as in
	// cert-manager's own controller binary.
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmechallenges"
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmeorders"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/gateways"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/ingresses"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/vault"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/venafi"
)

func main() {
	cfg, err := defaults()
	if err != nil {
		panic(err)
	}
	fs := pflag.NewFlagSet("controller", pflag.ExitOnError)
	fs.StringVar(&cfg.KubeConfig, "kubeconfig", cfg.KubeConfig, "kubeconfig of the API server (in a Pod: its service account)")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "watch only this namespace, without ClusterIssuers (default: every namespace)")
	fs.StringVar(&cfg.ClusterResourceNamespace, "cluster-resource-namespace", cfg.ClusterResourceNamespace, "namespace of the Secrets ClusterIssuers use")
	fs.StringSliceVar(&cfg.Controllers, "controllers", cfg.Controllers, "controllers to run: '*' for the default set, 'name' to add one, '-name' to leave one out")
	fs.IntVar(&cfg.NumberOfConcurrentWorkers, "concurrent-workers", cfg.NumberOfConcurrentWorkers, "workers per controller")
	command.LeaderElectionFlags(fs, &cfg.LeaderElectionConfig.LeaderElectionConfig)
	fs.StringVar(&cfg.HealthzListenAddress, "healthz-listen-address", cfg.HealthzListenAddress, "address of /livez")
	fs.StringVar(&cfg.ACMEHTTP01Config.SolverImage, "acme-http01-solver-image", cfg.ACMEHTTP01Config.SolverImage, "image of the ACME HTTP-01 solver Pods")
	fs.IntVar(&cfg.MaxConcurrentChallenges, "max-concurrent-challenges", cfg.MaxConcurrentChallenges, "ACME challenges presented at once")
	fs.BoolVar(&cfg.EnableCertificateOwnerRef, "enable-certificate-owner-ref", cfg.EnableCertificateOwnerRef, "make a Certificate the owner of its Secret")
	command.Run("controller", fs, &cfg.Logging, func(ctx context.Context) error { return run(ctx, cfg) })
}

func defaults() (*config.ControllerConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	cfg := &config.ControllerConfiguration{}
	return cfg, command.Defaulted(scheme, &configv1alpha1.ControllerConfiguration{}, cfg)
}
