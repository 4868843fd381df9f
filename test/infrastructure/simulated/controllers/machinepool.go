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

package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/cloud"
)

// MachinePoolReconciler reconciles SimulatedMachinePools: a pool keeps as
// many hosts as its MachinePool wants replicas, each booted with the pool's
// bootstrap data as it is when the host starts (a rotated token reaches only
// later instances, as with a cloud's scaling group and its launch template).
// Scaling down removes the oldest instances first; a new Kubernetes version
// replaces the instances one at a time (plannedInstances).
type MachinePoolReconciler struct {
	Client client.Client
	Cloud  cloud.Cloud
}

// SetupWithManager registers the reconciler; MachinePools wake their pool.
func (r *MachinePoolReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).WithOptions(opts).
		For(&infrav1.SimulatedMachinePool{}).
		Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			mp, ok := o.(*clusterv1.MachinePool)
			if !ok {
				return nil
			}
			ref := mp.Spec.Template.Spec.InfrastructureRef
			if ref.Kind != "SimulatedMachinePool" || ref.APIGroup != infrav1.GroupVersion.Group {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: mp.Namespace, Name: ref.Name}}}
		})).
		Named("simulatedmachinepool").
		Complete(r)
}

// launchTemplate is what a pool's new instances boot with: the MachinePool's
// Kubernetes version and the name of its bootstrap data secret, as
// cluster-api-provider-aws keeps them on its launch template.
type launchTemplate struct {
	version, dataSecretName string
}

// outdates reports whether an instance was launched from another template.
// What the instance's status lost (after a move or a restore) counts as up
// to date: those must not roll the pool.
func (t launchTemplate) outdates(in infrav1.SimulatedInstance) bool {
	return in.Version != "" && in.Version != t.version || in.DataSecretName != "" && in.DataSecretName != t.dataSecretName
}

// plannedInstances is the pool's instances after one step towards want
// instances of the template, and the ones to stop. Instances of another
// version or data secret name are replaced one at a time, as a scaling
// group's rolling refresh does: one new instance first (a surge of one),
// then, once every new one has bootstrapped, the oldest outdated one goes.
// Otherwise the pool scales, the oldest instances going first. A new data
// secret of the same name (a rotated token) rolls nothing, as with
// cluster-api-provider-aws, which rolls on the name only.
func plannedInstances(current []infrav1.SimulatedInstance, want int, tmpl launchTemplate, newName func() string) (keep, retired []infrav1.SimulatedInstance) {
	keep = slices.Clone(current)
	outdated := tmpl.outdates
	oldest := slices.IndexFunc(keep, outdated)
	if oldest < 0 {
		if len(keep) > want {
			retired, keep = keep[:len(keep)-want], keep[len(keep)-want:]
		}
		for len(keep) < want {
			keep = append(keep, tmpl.instance(newName()))
		}
		return keep, retired
	}
	upToDate := 0
	for _, in := range keep {
		if outdated(in) {
			continue
		}
		if in.HostPhase != infrav1.HostBootstrapped {
			return keep, nil // the surge instance is still on its way
		}
		upToDate++
	}
	switch {
	case len(keep) > want:
		retired = []infrav1.SimulatedInstance{keep[oldest]}
		keep = slices.Delete(keep, oldest, oldest+1)
	case upToDate < want:
		keep = append(keep, tmpl.instance(newName()))
	}
	return keep, retired
}

// instance is a new instance of the template, not started yet.
func (t launchTemplate) instance(name string) infrav1.SimulatedInstance {
	return infrav1.SimulatedInstance{Name: name, HostPhase: infrav1.HostPending, Version: t.version, DataSecretName: t.dataSecretName}
}

func instanceKey(pool *infrav1.SimulatedMachinePool, instance string) string {
	return pool.Namespace + "/" + instance
}

// Reconcile scales the pool's hosts to the MachinePool's replicas and
// reports each instance's progress.
func (r *MachinePoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &infrav1.SimulatedMachinePool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if res, p, err := whilePaused(ctx, r.Client, pool, pool.Labels[clusterv1.ClusterNameLabel]); p || err != nil {
		return res, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		for _, in := range pool.Status.Instances {
			if err := r.Cloud.StopHost(ctx, instanceKey(pool, in.Name)); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, removeFinalizer(ctx, r.Client, pool, infrav1.MachinePoolFinalizer)
	}
	mp, err := util.GetOwnerMachinePool(ctx, r.Client, pool.ObjectMeta)
	if err != nil || mp == nil {
		return ctrl.Result{}, err
	}
	if controllerutil.AddFinalizer(pool, infrav1.MachinePoolFinalizer) {
		if err := r.Client.Update(ctx, pool); err != nil {
			return ctrl.Result{}, err
		}
	}
	if mp.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		return ctrl.Result{}, nil // the MachinePool's update wakes us
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: *mp.Spec.Template.Spec.Bootstrap.DataSecretName}, secret); err != nil {
		return ctrl.Result{}, err
	}

	// Record the instances before starting them, so that no host runs
	// that the pool does not list.
	want := int(ptr.Deref(mp.Spec.Replicas, 1))
	instances := slices.Clone(pool.Status.Instances)
	if len(instances) == 0 {
		if instances, err = r.runningInstances(ctx, pool); err != nil {
			return ctrl.Result{}, err
		}
	}
	tmpl := launchTemplate{version: mp.Spec.Template.Spec.Version, dataSecretName: secret.Name}
	instances, retired := plannedInstances(instances, want, tmpl, func() string {
		return pool.Name + "-" + utilrand.String(5)
	})
	if !slices.Equal(instances, pool.Status.Instances) {
		pool.Status.Instances = instances
		if err := r.updateStatus(ctx, pool); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, in := range retired {
		if err := r.Cloud.StopHost(ctx, instanceKey(pool, in.Name)); err != nil {
			return ctrl.Result{}, err
		}
	}

	settled := true
	for i := range pool.Status.Instances {
		in := &pool.Status.Instances[i]
		h, running, err := r.Cloud.Host(ctx, instanceKey(pool, in.Name))
		if err != nil {
			return ctrl.Result{}, err
		}
		switch {
		case !running && in.HostPhase == infrav1.HostPending:
			if h, err = r.Cloud.StartHost(ctx, cloud.HostSpec{
				Name:       instanceKey(pool, in.Name),
				Hostname:   in.Name,
				InstanceID: InstanceID(pool.Namespace, in.Name),
				// The pool's launch template names the image of the
				// version the instance was planned with.
				KubernetesVersion: in.Version,
				BootDelay:         ptr.Deref(pool.Spec.BootDelay, metav1.Duration{}).Duration,
				Data:              secret.Data,
			}); err != nil {
				return ctrl.Result{}, fmt.Errorf("booting instance %s: %w", in.Name, err)
			}
			in.DataSecretVersion = secret.ResourceVersion
		case !running:
			in.HostPhase, in.HostMessage = infrav1.HostFailed, "the host is gone"
			continue
		}
		st := h.Status
		in.HostPhase, in.HostMessage = st.Phase, st.Message
		if st.Consumer != "" {
			in.Consumer = st.Consumer
		}
		settled = settled && (st.Phase == infrav1.HostBootstrapped || st.Phase == infrav1.HostFailed)
	}

	var ids []string
	for _, in := range pool.Status.Instances {
		ids = append(ids, ProviderID(pool.Namespace, in.Name))
	}
	if !slices.Equal(ids, pool.Spec.ProviderIDList) {
		status := pool.Status.DeepCopy()
		pool.Spec.ProviderIDList = ids
		if err := r.Client.Update(ctx, pool); err != nil {
			return ctrl.Result{}, err
		}
		pool.Status = *status // the update's answer carries the stored status
	}
	pool.Status.Replicas = ptr.To(int32(len(pool.Status.Instances)))
	pool.Status.Initialization.Provisioned = ptr.To(true)
	pool.Status.Ready = true
	if err := r.updateStatus(ctx, pool); err != nil {
		return ctrl.Result{}, err
	}
	if settled {
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
}

// runningInstances finds a pool's instances from its provider IDs, as a
// cloud lists a scaling group's: a pool whose status was lost (clusterctl
// move and restores copy no status) keeps the hosts it had.
func (r *MachinePoolReconciler) runningInstances(ctx context.Context, pool *infrav1.SimulatedMachinePool) ([]infrav1.SimulatedInstance, error) {
	var instances []infrav1.SimulatedInstance
	prefix := ProviderID(pool.Namespace, "")
	for _, id := range pool.Spec.ProviderIDList {
		name, ok := strings.CutPrefix(id, prefix)
		if !ok {
			continue
		}
		_, running, err := r.Cloud.Host(ctx, instanceKey(pool, name))
		if err != nil {
			return nil, err
		}
		if running {
			instances = append(instances, infrav1.SimulatedInstance{Name: name, HostPhase: infrav1.HostBooting})
		}
	}
	return instances, nil
}

func (r *MachinePoolReconciler) updateStatus(ctx context.Context, pool *infrav1.SimulatedMachinePool) error {
	err := r.Client.Status().Update(ctx, pool)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("the pool changed meanwhile: %w", err) // retried with the fresh object
	}
	return err
}
