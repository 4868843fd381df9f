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

package kubeadmconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	capicontrollerutil "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/predicates"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/initlock"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

const (
	// DefaultTokenTTL is how long a bootstrap token is valid after it is
	// created or extended (upstream's default for --bootstrap-token-ttl).
	DefaultTokenTTL = 15 * time.Minute

	// initLockRetry is how often a control-plane machine waiting for another
	// one's init checks the lock again (its holder may have gone away).
	initLockRetry = 10 * time.Second
	// waitRetry is how often states that no watch reports are looked at again:
	// referenced Secrets, certificates, the control plane's version.
	waitRetry = 20 * time.Second
	// unreachableRetry is how often a workload cluster that cannot be reached
	// is tried again (the cluster cache also reports when it connects).
	unreachableRetry = 30 * time.Second
)

// InitLocker guards kubeadm init: one machine per cluster holds it.
type InitLocker interface {
	Acquire(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine) bool
	// Release frees the lock held by machine, or by whoever when nil.
	Release(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine) bool
}

// The controller records a join's bootstrap token in the config's spec (patch).
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs/status,verbs=get;patch;update
// Controller references that block owner deletion (data secrets) need update on
// the owner's finalizers where OwnerReferencesPermissionEnforcement is on.
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs/finalizers,verbs=update
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines;machinepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kubeadmcontrolplanes,verbs=get
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// Delete on Secrets is never used as such: where OwnerReferencesPermissionEnforcement
// is on, changing a data secret's owner references (a restore's new UID, a
// controller reference upstream wrote without blockOwnerDeletion) needs it.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Reconciler turns KubeadmConfigs into bootstrap data secrets.
type Reconciler struct {
	// Client is the manager's client: cached reads, except for Secrets and
	// ConfigMaps, which it reads live.
	Client client.Client
	// CachingClient reads Secrets labelled with a cluster name (certificates,
	// data secrets, kubeconfigs) and ConfigMaps (the init lock) from the cache.
	CachingClient client.Client
	// APIReader reads live: Secrets a spec references, control-plane objects.
	APIReader client.Reader
	// ClusterCache reaches workload clusters (bootstrap tokens).
	ClusterCache clustercache.ClusterCache
	// Gates are the provider's feature gates (formats, MachinePool).
	Gates featuregate.FeatureGate
	// Recorder records events on KubeadmConfigs.
	Recorder events.EventRecorder
	// TokenTTL is the bootstrap tokens' validity (--bootstrap-token-ttl).
	TokenTTL time.Duration
	// DataSizeLimit is the size in bytes over which the BootstrapDataSizeWithinLimit
	// condition warns (--bootstrap-data-size-limit); 0 means no check.
	DataSizeLimit int
	// WatchFilterValue limits the controller to objects with Cluster API's
	// watch-filter label of this value (--watch-filter).
	WatchFilterValue string
	// InitLock guards kubeadm init; upstream's ConfigMap lock by default, so
	// locks held under upstream's provider are honoured after a swap.
	InitLock InitLocker
	// Clock is the controller's time; the real one when nil.
	Clock clock.PassiveClock

	checks       tokenChecks
	lockReleases lockReleases
	nodes        nodeLists
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.CachingClient == nil || r.APIReader == nil || r.ClusterCache == nil || r.Gates == nil || r.Recorder == nil {
		return errors.New("the KubeadmConfig controller needs Client, CachingClient, APIReader, ClusterCache, Gates and Recorder")
	}
	if r.TokenTTL <= 0 {
		r.TokenTTL = DefaultTokenTTL
	}
	if r.InitLock == nil {
		r.InitLock = initlock.Lock{Reader: r.APIReader, Writer: r.Client}
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "kubeadmconfig")
	// Cluster API's controller builder: its reconcile metrics, and the
	// PriorityQueue and ReconcilerRateLimiting gates.
	b := capicontrollerutil.NewControllerManagedBy(mgr, log).
		Named("kubeadmconfig").
		WithOptions(options).
		For(&bootstrapv1.KubeadmConfig{}, builder.WithPredicates(configChanged, predicate.NewPredicateFuncs(hasBootstrapOwner))).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToOwnedConfig), machineChanged).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToConfigs), clusterChanged).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		WatchesRawSource(r.ClusterCache.GetClusterSource("kubeadmconfig", r.clusterToConfigs))
	if r.Gates.Enabled(feature.MachinePool) {
		b = b.Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(machinePoolToConfig), machinePoolChanged)
	}
	return b.Complete(ctx, r)
}

// Reconcile computes one KubeadmConfig's data and status. Its status is written
// in one patch at the end, and only when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cfg := &bootstrapv1.KubeadmConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			r.checks.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !cfg.DeletionTimestamp.IsZero() {
		// The data secret and the certificates it owns go with it (garbage collection).
		return ctrl.Result{}, nil
	}
	before := cfg.DeepCopy()
	s := &scope{cfg: cfg}
	o := r.reconcile(ctx, s)
	res, err := o.res, o.err
	if err == nil {
		cfg.Status.ObservedGeneration = cfg.Generation
	}
	if werr := r.writeStatus(ctx, before, s); werr != nil {
		err = kerrors.NewAggregate([]error{err, werr})
	}
	return res, s.redactError(err)
}

func (r *Reconciler) writeStatus(ctx context.Context, before *bootstrapv1.KubeadmConfig, s *scope) error {
	if s.keepStatus {
		return nil
	}
	if err := s.summarize(); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(before.Status, s.cfg.Status) {
		return nil
	}
	// One merge patch of status: this controller is the only writer of a
	// KubeadmConfig's status, so no read-modify-write loop is needed. The
	// base is the object as it is now but for its status, so that a spec
	// this reconcile patched (its token) is not sent again.
	base := s.cfg.DeepCopy()
	base.Status = before.Status
	if err := r.Client.Status().Patch(ctx, s.cfg, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("patching the status of KubeadmConfig %s: %w", klog.KObj(s.cfg), err)
	}
	return nil
}

func (r *Reconciler) reconcile(ctx context.Context, s *scope) outcome {
	o, err := r.getOwner(ctx, s.cfg)
	var missing *ownerNotFoundError
	switch {
	case errors.As(err, &missing):
		s.dataNotAvailablef(bootstrapv1.KubeadmConfigOwnerNotFoundReason, "Waiting for the %s %s that owns this KubeadmConfig: not found", missing.kind, missing.name)
		return outcome{}
	case errors.Is(err, errPoolsDisabled):
		r.refusef(s, bootstrapv1.KubeadmConfigMachinePoolFeatureDisabledReason, "%v (manager flag --feature-gates=%s=true, clusterctl variable %s=true)",
			err, feature.MachinePool, feature.EnvVar(feature.MachinePool))
		return outcome{}
	case err != nil:
		return fail(err)
	case o == nil:
		// Cluster API sets the owner right after creating the config; that update brings it back here.
		s.keepStatus = true
		return outcome{}
	}
	s.owner = o
	s.hadData = ptr.Deref(s.cfg.Status.Initialization.DataSecretCreated, false) || s.cfg.Status.DataSecretName != "" || o.dataSecretName() != ""
	log := ctrl.LoggerFrom(ctx).WithValues(o.kind(), klog.KObj(o.object()), "Cluster", klog.KRef(s.cfg.Namespace, o.clusterName()))
	ctx = ctrl.LoggerInto(ctx, log)

	s.cluster = &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: o.clusterName()}, s.cluster); err != nil {
		if apierrors.IsNotFound(err) {
			s.dataNotAvailablef(bootstrapv1.KubeadmConfigClusterNotFoundReason, "Cluster %s, named by %s, not found", o.clusterName(), o)
			return outcome{}
		}
		return fail(err)
	}
	if s.setPaused() {
		return outcome{}
	}

	switch {
	case ptr.Deref(s.cfg.Status.Initialization.DataSecretCreated, false):
		return r.reconcileCreated(ctx, s)
	case o.dataSecretName() != "":
		// Moved or restored without its status: the owner already uses its
		// data, whose owner reference and token are looked after as ever.
		s.cfg.Status.DataSecretName = o.dataSecretName()
		s.cfg.Status.Initialization.DataSecretCreated = ptr.To(true)
		return r.reconcileCreated(ctx, s)
	}
	return r.reconcileData(ctx, s)
}
