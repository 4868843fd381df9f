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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/cluster-api/controllers/clustercache"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/cloud"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// NetworkReconciler is the simulated cloud's network side for each workload
// cluster, what a cloud's route controller does: it reads the cluster's
// Nodes and gives every host of the cluster its pod CIDR (the bridge CNI
// configuration) and a route to every other node's pod CIDR; and what its
// node lifecycle controller does: the Node of a host that is gone is deleted.
//
// It also makes the one change the lab needs in what kubeadm installed:
// kube-proxy sets the machine-wide nf_conntrack_max unless told not to, and
// a host's network namespace may not (Cluster API's Docker provider edits
// the kubeadm configuration for the same reason). The bootstrap data stays
// as the provider rendered it; kube-proxy's ConfigMap gets
// conntrack.maxPerCore: 0 once kubeadm created it.
type NetworkReconciler struct {
	Client       client.Client
	Cloud        cloud.Cloud
	ClusterCache clustercache.ClusterCache
}

// SetupWithManager registers the reconciler.
func (r *NetworkReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).WithOptions(opts).For(&infrav1.SimulatedCluster{}).Named("simulatednetwork").Complete(r)
}

// networkResync is how often a cluster's Nodes are read again.
const networkResync = 3 * time.Second

// Reconcile applies the cluster's pod network to its hosts.
func (r *NetworkReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sc := &infrav1.SimulatedCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, sc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if res, p, err := whilePaused(ctx, r.Client, sc, clusterNameOf(sc)); p || err != nil {
		return res, err
	}
	workload, err := r.ClusterCache.GetUncachedClient(ctx, client.ObjectKey{Namespace: sc.Namespace, Name: clusterNameOf(sc)})
	if err != nil {
		// Not reachable yet: the control plane is still coming up.
		return ctrl.Result{RequeueAfter: networkResync}, nil //nolint:nilerr // waited for, not an error
	}
	var nodes corev1.NodeList
	if err := workload.List(ctx, &nodes); err != nil {
		return ctrl.Result{RequeueAfter: networkResync}, nil //nolint:nilerr // as above
	}
	type member struct {
		host          string
		cidr, address string
	}
	var members []member
	for _, n := range nodes.Items {
		var h cloud.Instance
		running := false
		if key := hostKeyOfProviderID(n.Spec.ProviderID); key != "" {
			if h, running, err = r.Cloud.Host(ctx, key); err != nil {
				return ctrl.Result{}, err
			}
		}
		if !running && strings.HasPrefix(n.Spec.ProviderID, providerIDPrefix) {
			// The instance is gone: its Node goes too, as a cloud
			// controller manager's node lifecycle controller does (Cluster
			// API deletes the Nodes of Machines itself, but a MachinePool
			// being deleted leaves its instances' Nodes to the cloud).
			if err := workload.Delete(ctx, &n); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("deleting the Node of a gone instance: %w", err)
			}
			continue
		}
		if !running {
			continue // not one of ours (its kubelet has no provider ID)
		}
		m := member{host: h.Name, cidr: n.Spec.PodCIDR}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				m.address = a.Address
			}
		}
		if m.address == "" {
			m.address = h.Address.String()
		}
		members = append(members, m)
	}
	for _, m := range members {
		n := host.PodNetwork{PodCIDR: m.cidr, Routes: map[string]string{}}
		for _, peer := range members {
			if peer.host != m.host && peer.cidr != "" {
				n.Routes[peer.cidr] = peer.address
			}
		}
		if err := r.Cloud.SetPodNetwork(ctx, m.host, n); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := keepConntrackMaxAlone(ctx, workload); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: networkResync}, nil
}

// keepConntrackMaxAlone sets conntrack.maxPerCore to 0 in kube-proxy's
// configuration and restarts the kube-proxy pods that started without it.
func keepConntrackMaxAlone(ctx context.Context, c client.Client) error {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-proxy"}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return nil // not reachable now; next round
	}
	const key = "config.conf"
	var conf map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data[key]), &conf); err != nil || conf == nil {
		return fmt.Errorf("kube-proxy's %s is not YAML: %v", key, err)
	}
	conntrack, _ := conf["conntrack"].(map[string]any)
	if conntrack == nil {
		conntrack = map[string]any{}
	}
	if v, ok := conntrack["maxPerCore"]; ok && fmt.Sprint(v) == "0" {
		return nil
	}
	conntrack["maxPerCore"] = 0
	conf["conntrack"] = conntrack
	b, err := yaml.Marshal(conf)
	if err != nil {
		return err
	}
	cm.Data[key] = string(b)
	if err := c.Update(ctx, cm); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("kube-system"), client.MatchingLabels{"k8s-app": "kube-proxy"}); err != nil {
		return err
	}
	for i := range pods.Items {
		if err := c.Delete(ctx, &pods.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// hostKeyOfProviderID is the Lab's name for the host with that provider ID.
func hostKeyOfProviderID(providerID string) string {
	id, ok := strings.CutPrefix(providerID, providerIDPrefix)
	if !ok {
		return ""
	}
	namespace, name, ok := strings.Cut(id, ".")
	if !ok {
		return ""
	}
	return namespace + "/" + name
}
