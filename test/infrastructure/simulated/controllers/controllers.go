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

// Package controllers is the simulated infrastructure provider's reconcilers:
// SimulatedCluster gets a control-plane endpoint on the Lab's network, and
// each SimulatedMachine becomes a host that runs its Machine's bootstrap data,
// each SimulatedMachinePool a group of hosts that run their pool's.
package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/cloud"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// APIServerPort is the port of every workload cluster's endpoint and of
// every API server behind it.
const APIServerPort = 6443

// endpointKey names a cluster's reserved endpoint address in the Lab.
func endpointKey(namespace, cluster string) string { return "endpoint:" + namespace + "/" + cluster }

// clusterNameOf is the Cluster a SimulatedCluster belongs to (its name may
// differ: ClusterClass generates it).
func clusterNameOf(sc *infrav1.SimulatedCluster) string {
	if name := sc.Labels[clusterv1.ClusterNameLabel]; name != "" {
		return name
	}
	return sc.Name
}

// ClusterReconciler reconciles SimulatedClusters.
type ClusterReconciler struct {
	Client client.Client
	Cloud  cloud.Cloud
}

// SetupWithManager registers the reconciler.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).WithOptions(opts).For(&infrav1.SimulatedCluster{}).Named("simulatedcluster").Complete(r)
}

// Reconcile gives the cluster its endpoint and marks it provisioned.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sc := &infrav1.SimulatedCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, sc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if res, p, err := whilePaused(ctx, r.Client, sc, clusterNameOf(sc)); p || err != nil {
		return res, err
	}
	key := endpointKey(sc.Namespace, clusterNameOf(sc))
	if !sc.DeletionTimestamp.IsZero() {
		if err := r.Cloud.RemoveLoadBalancer(ctx, key); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, removeFinalizer(ctx, r.Client, sc, infrav1.ClusterFinalizer)
	}
	if controllerutil.AddFinalizer(sc, infrav1.ClusterFinalizer) {
		if err := r.Client.Update(ctx, sc); err != nil {
			return ctrl.Result{}, err
		}
	}
	// The endpoint is a load balancer over the control-plane hosts, which
	// come and go while it stays.
	addr, err := r.Cloud.LoadBalancer(ctx, key, APIServerPort)
	if err != nil {
		return ctrl.Result{}, err
	}
	if sc.Spec.ControlPlaneEndpoint.Host != addr.String() {
		sc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: addr.String(), Port: APIServerPort}
		if err := r.Client.Update(ctx, sc); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !ptr.Deref(sc.Status.Initialization.Provisioned, false) {
		sc.Status.Initialization.Provisioned = ptr.To(true)
		return ctrl.Result{}, r.Client.Status().Update(ctx, sc)
	}
	return ctrl.Result{}, nil
}

// pausedRecheck is how often a paused object is looked at again (nothing
// here watches its Cluster for the unpause).
const pausedRecheck = 3 * time.Second

// paused is true while the object's Cluster is paused or the object carries
// the paused annotation: clusterctl move pauses the Cluster, copies its
// objects and then deletes them from the source (finalizers removed first),
// and the source's provider must then leave them and their hosts alone, as
// Cluster API's providers do. A Cluster not (or no longer) there pauses
// nothing.
func paused(ctx context.Context, c client.Client, o metav1.Object, clusterName string) (bool, error) {
	if clusterName == "" {
		return annotations.HasPaused(o), nil
	}
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: clusterName}, cluster); err != nil {
		return annotations.HasPaused(o), client.IgnoreNotFound(err)
	}
	return annotations.IsPaused(cluster, o), nil
}

// whilePaused ends a reconcile of a paused object (p): it is looked at again
// after pausedRecheck.
func whilePaused(ctx context.Context, c client.Client, o metav1.Object, clusterName string) (res ctrl.Result, p bool, err error) {
	if p, err = paused(ctx, c, o, clusterName); p && err == nil {
		res.RequeueAfter = pausedRecheck
	}
	return res, p, err
}

func removeFinalizer(ctx context.Context, c client.Client, o client.Object, f string) error {
	if controllerutil.RemoveFinalizer(o, f) {
		return client.IgnoreNotFound(c.Update(ctx, o))
	}
	return nil
}

// MachineReconciler reconciles SimulatedMachines.
type MachineReconciler struct {
	Client client.Client
	Cloud  cloud.Cloud
}

// SetupWithManager registers the reconciler; Machines wake their
// SimulatedMachine when their bootstrap data appears.
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).WithOptions(opts).
		For(&infrav1.SimulatedMachine{}).
		Watches(&clusterv1.Machine{}, handlerForInfraRef()).
		Named("simulatedmachine").
		Complete(r)
}

// hostKey is the Lab's name for a SimulatedMachine's host.
func hostKey(sm *infrav1.SimulatedMachine) string { return sm.Namespace + "/" + sm.Name }

// InstanceID is the instance-id in a SimulatedMachine's host's metadata.
func InstanceID(namespace, name string) string { return namespace + "." + name }

// providerIDPrefix starts every provider ID of the simulated cloud.
const providerIDPrefix = "simulated://"

// ProviderID is the provider ID of a SimulatedMachine's host: what its
// kubelet is told to report, through the instance-id placeholder of its
// bootstrap data (--provider-id=simulated://{{ ds.meta_data.instance_id }}).
func ProviderID(namespace, name string) string { return providerIDPrefix + InstanceID(namespace, name) }

// Reconcile boots a host once the Machine has bootstrap data, and reports
// how far it got.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sm := &infrav1.SimulatedMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, sm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if res, p, err := whilePaused(ctx, r.Client, sm, sm.Labels[clusterv1.ClusterNameLabel]); p || err != nil {
		return res, err
	}
	if !sm.DeletionTimestamp.IsZero() {
		if err := r.Cloud.StopHost(ctx, hostKey(sm)); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, removeFinalizer(ctx, r.Client, sm, infrav1.MachineFinalizer)
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, sm.ObjectMeta)
	if err != nil || machine == nil {
		return ctrl.Result{}, err
	}
	if controllerutil.AddFinalizer(sm, infrav1.MachineFinalizer) {
		if err := r.Client.Update(ctx, sm); err != nil {
			return ctrl.Result{}, err
		}
	}
	h, running, err := r.Cloud.Host(ctx, hostKey(sm))
	if err != nil {
		return ctrl.Result{}, err
	}
	if !running && sm.Spec.ProviderID == "" {
		if machine.Spec.Bootstrap.DataSecretName == nil {
			return ctrl.Result{}, r.setHostStatus(ctx, sm, host.Status{Phase: infrav1.HostPending, Message: "waiting for bootstrap data"})
		}
		secret := &corev1.Secret{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: sm.Namespace, Name: *machine.Spec.Bootstrap.DataSecretName}, secret); err != nil {
			return ctrl.Result{}, err
		}
		spec := cloud.HostSpec{
			Name:       hostKey(sm),
			Hostname:   machine.Name,
			InstanceID: InstanceID(sm.Namespace, sm.Name),
			Image:      sm.Spec.Image,
			// A cloud boots the image of the Machine's Kubernetes
			// version; so does the Lab.
			KubernetesVersion: machine.Spec.Version,
			Data:              secret.Data,
		}
		if util.IsControlPlaneMachine(machine) {
			spec.LoadBalancer = endpointKey(sm.Namespace, machine.Spec.ClusterName)
			if _, err := r.Cloud.LoadBalancer(ctx, spec.LoadBalancer, APIServerPort); err != nil {
				return ctrl.Result{}, err
			}
		}
		if sm.Spec.BootDelay != nil {
			spec.BootDelay = sm.Spec.BootDelay.Duration
		}
		if h, err = r.Cloud.StartHost(ctx, spec); err != nil {
			// Shown where users look (the Machine's InfrastructureReady
			// condition), not only in the provider's log.
			_ = r.setHostStatus(ctx, sm, host.Status{Phase: infrav1.HostPending, Message: "booting the host: " + err.Error()})
			return ctrl.Result{}, fmt.Errorf("booting host: %w", err)
		}
		running = true
		sm.Spec.ProviderID = ProviderID(sm.Namespace, sm.Name)
		if err := r.Client.Update(ctx, sm); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !running {
		// The provider ID is set but the host is gone (the Lab restarted).
		return ctrl.Result{}, r.setHostStatus(ctx, sm, host.Status{Phase: infrav1.HostFailed, Message: "the host is gone"})
	}
	sm.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: h.Address.String()}}
	sm.Status.Initialization.Provisioned = ptr.To(true)
	st := h.Status
	if err := r.setHostStatus(ctx, sm, st); err != nil {
		return ctrl.Result{}, err
	}
	switch st.Phase {
	case infrav1.HostBootstrapped, infrav1.HostFailed:
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
}

func (r *MachineReconciler) setHostStatus(ctx context.Context, sm *infrav1.SimulatedMachine, st host.Status) error {
	sm.Status.HostPhase = st.Phase
	sm.Status.HostMessage = st.Message
	if st.Consumer != "" {
		sm.Status.Consumer = st.Consumer
	}
	// Ready, which Cluster API mirrors into the Machine's
	// InfrastructureReady condition: the host ran its bootstrap data. A true
	// condition carries no message, as Cluster API's contract asks (the
	// Machine's Ready summary would show it); the host's last words stay in
	// status.hostMessage.
	ready := metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: string(st.Phase), Message: st.Message}
	if st.Phase == infrav1.HostBootstrapped {
		ready.Status, ready.Message = metav1.ConditionTrue, ""
	}
	ready.ObservedGeneration = sm.Generation
	meta.SetStatusCondition(&sm.Status.Conditions, ready)
	err := r.Client.Status().Update(ctx, sm)
	if apierrors.IsConflict(err) {
		return nil // the next event brings the fresh object
	}
	return err
}
