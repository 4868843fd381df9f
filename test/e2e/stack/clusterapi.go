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
	"path/filepath"
	"strconv"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/process"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	kcpreconciler "sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	kcpadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	kcpconversion "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/conversion"
	capicluster "sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	capiclusterclass "sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	capimachine "sigs.k8s.io/cluster-api/core/reconcilers/machine"
	capimachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	capimachinehealthcheck "sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	capimachinepool "sigs.k8s.io/cluster-api/core/reconcilers/machinepool"
	capimachineset "sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	topologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	topologymachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	topologymachineset "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	capisetup "sigs.k8s.io/cluster-api/core/setup"
	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	coreconversion "sigs.k8s.io/cluster-api/core/webhooks/conversion"
	capifeature "sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/index"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// Cluster API runs in this process as its own manager binaries wire it:
// the core reconcilers (Cluster, Machine, MachineSet, MachineDeployment,
// MachinePool, MachineHealthCheck), the topology reconcilers (ClusterClass,
// managed topologies), KubeadmControlPlane's, and Cluster API's own admission
// webhooks (core and KubeadmControlPlane) on a webhook server of their own.
// Its scheme holds upstream's KubeadmConfig types, as KubeadmControlPlane
// needs: it creates KubeadmConfigs as upstream's Go type, which this
// provider's API server schema (a superset) stores.

// ClusterAPISyncPeriod is how often Cluster API's controllers revisit every
// object: short, so that a test sees several resyncs of a steady
// KubeadmControlPlane within a minute.
const ClusterAPISyncPeriod = 20 * time.Second

// clusterAPIScheme is the scheme of the in-process Cluster API manager.
func clusterAPIScheme() (*k8sruntime.Scheme, error) {
	s := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		clusterv1.AddToScheme, clusterv1beta1.AddToScheme,
		upstreambootstrapv1.AddToScheme,
		controlplanev1.AddToScheme, controlplanev1beta1.AddToScheme,
		runtimev1.AddToScheme,
		infrav1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// clusterAPICacheOptions are core Cluster API's cache options, except that
// cached Secrets (those of clusters) keep their data: core's manager needs
// only the kubeconfigs' and drops the rest, KubeadmControlPlane reads the
// cluster CAs through the same cache.
func clusterAPICacheOptions(scheme *k8sruntime.Scheme, name string) ctrlcache.Options {
	opts := capisetup.ManagerCacheOptions(scheme, name, "", ClusterAPISyncPeriod)
	for obj, byObject := range opts.ByObject {
		if _, ok := obj.(*corev1.Secret); ok {
			byObject.Transform = func(in any) (any, error) {
				if s, ok := in.(*corev1.Secret); ok {
					s.SetManagedFields(nil)
				}
				return in, nil
			}
			opts.ByObject[obj] = byObject
		}
	}
	return opts
}

// clusterAPIGates turns on what the stack runs: managed topologies,
// MachinePools, Machine taints as Cluster API's e2e config has them, and
// Ignition in KubeadmControlPlane's own admission.
func clusterAPIGates() error {
	return capifeature.MutableGates.SetFromMap(map[string]bool{
		string(capifeature.ClusterTopology):                true,
		string(capifeature.MachinePool):                    true,
		string(capifeature.MachineTaintPropagation):        true,
		string(capifeature.KubeadmBootstrapFormatIgnition): true,
	})
}

// startClusterAPI runs Cluster API's reconcilers and webhooks in one
// controller-runtime manager.
func (m *Management) startClusterAPI(ctx context.Context) error {
	logFile, err := m.openLog(clusterAPILog)
	if err != nil {
		return err
	}
	logger := crzap.New(crzap.WriteTo(logFile), crzap.UseDevMode(false))
	if err := clusterAPIGates(); err != nil {
		return err
	}
	scheme, err := clusterAPIScheme()
	if err != nil {
		return err
	}
	// Informer names are unique in a process: one per management cluster.
	controllerName := "capi-e2e-" + m.Name
	hookPort, err := process.FreeTCPPort()
	if err != nil {
		return err
	}
	hooks := m.env.Webhooks()
	mgr, err := ctrl.NewManager(m.Config, ctrl.Options{
		Scheme: scheme,
		Logger: logger,
		// Another management cluster's Cluster API may run in this process
		// with the same controllers.
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(!m.first)},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  clusterAPICacheOptions(scheme, controllerName),
		Client:                 capisetup.ManagerClientOptions(),
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: "127.0.0.1", Port: hookPort, CertDir: hooks.CertDir,
		}),
	})
	if err != nil {
		return err
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return err
	}
	secretClient, err := capisetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return err
	}
	cache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretClient,
		Cache:        capisetup.ClusterCacheCacheOptions(),
		Client:       capisetup.ClusterCacheClientOptions(controllerName, 20, 30),
	}, controller.Options{MaxConcurrentReconciles: 10})
	if err != nil {
		return err
	}
	if err := setupClusterAPIWebhooks(mgr, cache, m.first); err != nil {
		return err
	}
	opts := controller.Options{MaxConcurrentReconciles: 5}
	kcpOpts := controller.Options{MaxConcurrentReconciles: 5, ReconciliationTimeout: 3 * time.Minute}
	for _, setup := range []func() error{
		func() error {
			return (&capicluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache,
				RemoteConnectionGracePeriod: 50 * time.Second}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&capimachine.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache,
				RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&capimachineset.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&capimachinedeployment.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&capimachinepool.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&capimachinehealthcheck.Reconciler{Client: mgr.GetClient(), ClusterCache: cache}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&capiclusterclass.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&topologycluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&topologymachinedeployment.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&topologymachineset.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&kcpreconciler.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), SecretCachingClient: secretClient, ClusterCache: cache,
				EtcdDialTimeout: 10 * time.Second, EtcdCallTimeout: 15 * time.Second, EtcdLogger: zap.NewNop(),
				RemoteConditionsGracePeriod: 5 * time.Minute,
			}).SetupWithManager(ctx, mgr, kcpOpts)
		},
	} {
		if err := setup(); err != nil {
			return err
		}
	}
	mctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	m.capiStopped = make(chan struct{})
	go func() {
		defer close(m.capiStopped)
		if err := mgr.Start(mctx); err != nil {
			fmt.Fprintf(logFile, "cluster api manager: %v\n", err)
		}
	}()
	if err := testenv.WaitForTLS(net.JoinHostPort("127.0.0.1", strconv.Itoa(hookPort)), 60*time.Second); err != nil {
		return fmt.Errorf("Cluster API's webhook server: %w", err)
	}
	return installClusterAPIWebhooks(ctx, m.Client, hookPort, hooks.CAData)
}

// setupClusterAPIWebhooks registers Cluster API's webhooks for the kinds the
// stack uses.
func setupClusterAPIWebhooks(mgr ctrl.Manager, cache clustercache.ClusterCache, first bool) error {
	// v1beta1 clients' references are converted at the version each CRD's
	// contract label names. The getter is process-wide: the first
	// management cluster's serves all (their CRDs are the same).
	if first {
		getter := func(ctx context.Context, gk schema.GroupKind) (string, error) { return contractVersion(ctx, mgr, gk) }
		coreconversion.SetAPIVersionGetter(getter)
		kcpconversion.SetAPIVersionGetter(getter)
	}
	for _, w := range []interface{ SetupWebhookWithManager(ctrl.Manager) error }{
		&coreadmission.ClusterClass{Client: mgr.GetClient()},
		&coreadmission.Cluster{Client: mgr.GetClient(), ClusterCacheReader: cache},
		&coreadmission.Machine{}, &coreadmission.MachineSet{}, &coreadmission.MachineDeployment{},
		&coreadmission.MachinePool{}, &coreadmission.MachineHealthCheck{}, &coreadmission.MachineDrainRule{},
		&kcpadmission.KubeadmControlPlane{}, &kcpadmission.ScaleValidator{Client: mgr.GetClient()}, &kcpadmission.KubeadmControlPlaneTemplate{},
	} {
		if err := w.SetupWebhookWithManager(mgr); err != nil {
			return fmt.Errorf("Cluster API webhook %T: %w", w, err)
		}
	}
	return nil
}

// clusterAPIWebhookResources are the resources whose webhooks the stack
// serves; Cluster API's manifests list more (ClusterResourceSets, IPAM,
// ExtensionConfigs), which the stack does not run.
var clusterAPIWebhookResources = map[string]bool{
	"clusters": true, "clusterclasses": true, "machines": true, "machinesets": true, "machinedeployments": true,
	"machinepools": true, "machinehealthchecks": true, "machinedrainrules": true,
	"kubeadmcontrolplanes": true, "kubeadmcontrolplanes/scale": true, "kubeadmcontrolplanetemplates": true,
}

// installClusterAPIWebhooks creates Cluster API's webhook configurations
// from its own manifests (core and KubeadmControlPlane), pointed at the
// in-process webhook server, under names of their own (this provider's
// configurations carry the same generated names).
func installClusterAPIWebhooks(ctx context.Context, c client.Client, port int, ca []byte) error {
	dir, err := testenv.ClusterAPIModuleDir()
	if err != nil {
		return err
	}
	for prefix, file := range map[string]string{
		"capi-core-": filepath.Join(dir, "core", "config", "webhook", "manifests.yaml"),
		"capi-kcp-":  filepath.Join(dir, "controlplane", "kubeadm", "config", "webhook", "manifests.yaml"),
	} {
		serving := webhookServer{host: "127.0.0.1", port: port, ca: ca}
		if err := installWebhookConfigurations(ctx, c, file, serving, prefix, servedWebhook); err != nil {
			return err
		}
	}
	return nil
}

// servedWebhook is true for a webhook of one of the resources the stack serves.
func servedWebhook(hook map[string]any) bool {
	rules, _, _ := unstructured.NestedSlice(hook, "rules")
	for _, r := range rules {
		resources, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
		for _, res := range resources {
			if clusterAPIWebhookResources[res] {
				return true
			}
		}
	}
	return false
}

// contractVersion is the API version a kind is read at: the version its
// CRD's contract label (cluster.x-k8s.io/v1beta2) names.
func contractVersion(ctx context.Context, mgr ctrl.Manager, gk schema.GroupKind) (string, error) {
	mapping, err := mgr.GetRESTMapper().RESTMapping(gk)
	if err != nil {
		return "", err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Name: mapping.Resource.Resource + "." + gk.Group}, crd); err != nil {
		return "", err
	}
	v, ok := crd.Labels[clusterv1.GroupVersion.String()]
	if !ok {
		return "", fmt.Errorf("CRD %s has no %s contract label", crd.Name, clusterv1.GroupVersion)
	}
	return schema.GroupVersion{Group: gk.Group, Version: v}.String(), nil
}
