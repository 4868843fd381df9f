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

// Command webhook is cert-manager's admission webhook: it validates and
// defaults cert-manager's resources, serving a certificate signed by a CA it
// keeps in a Secret. It takes the flags cert-manager's Helm chart passes to
// its webhook.
package main

import (
	"context"

	"github.com/spf13/pflag"

	config "github.com/cert-manager/cert-manager/internal/apis/config/webhook"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/webhook/scheme"
	"github.com/cert-manager/cert-manager/internal/webhook"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/webhook/v1alpha1"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	"github.com/cert-manager/cert-manager/cabpkformats/internal/command"
)

func main() {
	cfg, err := defaults()
	if err != nil {
		panic(err)
	}
	fs := pflag.NewFlagSet("webhook", pflag.ExitOnError)
	fs.StringVar(&cfg.KubeConfig, "kubeconfig", cfg.KubeConfig, "kubeconfig of the API server (in a Pod: its service account)")
	fs.Int32Var(&cfg.SecurePort, "secure-port", cfg.SecurePort, "port the admission webhook listens on (TLS)")
	fs.Int32Var(&cfg.HealthzPort, "healthz-port", cfg.HealthzPort, "port of /healthz and /livez")
	fs.StringVar(&cfg.TLSConfig.Dynamic.SecretNamespace, "dynamic-serving-ca-secret-namespace", cfg.TLSConfig.Dynamic.SecretNamespace, "namespace of the Secret that holds the serving CA")
	fs.StringVar(&cfg.TLSConfig.Dynamic.SecretName, "dynamic-serving-ca-secret-name", cfg.TLSConfig.Dynamic.SecretName, "name of the Secret that holds the serving CA")
	fs.StringSliceVar(&cfg.TLSConfig.Dynamic.DNSNames, "dynamic-serving-dns-names", cfg.TLSConfig.Dynamic.DNSNames, "DNS names of the serving certificate")
	fs.StringVar(&cfg.TLSConfig.Filesystem.CertFile, "tls-cert-file", cfg.TLSConfig.Filesystem.CertFile, "serving certificate file (instead of a dynamic one)")
	fs.StringVar(&cfg.TLSConfig.Filesystem.KeyFile, "tls-private-key-file", cfg.TLSConfig.Filesystem.KeyFile, "serving key file (instead of a dynamic one)")
	fs.StringVar(&cfg.MetricsListenAddress, "metrics-listen-address", cfg.MetricsListenAddress, "metrics address (0 turns metrics off)")
	command.Run("webhook", fs, &cfg.Logging, func(ctx context.Context) error { return run(ctx, cfg) })
}

func defaults() (*config.WebhookConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	cfg := &config.WebhookConfiguration{}
	return cfg, command.Defaulted(scheme, &configv1alpha1.WebhookConfiguration{}, cfg)
}

func run(ctx context.Context, cfg *config.WebhookConfiguration) error {
	srv, err := webhook.NewCertManagerWebhookServer(logf.FromContext(ctx), *cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
