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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"sigs.k8s.io/cluster-api/controllers/clustercache"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/cloud"
)

// What the controllers read and write in the management cluster: their own
// kinds, the Cluster API objects that own them, bootstrap data and the
// workload clusters' kubeconfigs (read by name, never cached).
// +kubebuilder:rbac:groups=infrastructure.simulated.cabpk-formats.io,resources=simulatedclusters;simulatedmachines;simulatedmachinepools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.simulated.cabpk-formats.io,resources=simulatedclusters/status;simulatedmachines/status;simulatedmachinepools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines;machinepools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Options are what every controller of the provider is given.
type Options struct {
	// Cloud is where hosts and load balancers come from.
	Cloud cloud.Cloud
	// ClusterCache reaches the workload clusters (their Nodes).
	ClusterCache clustercache.ClusterCache
	// Concurrency is how many objects of each kind are reconciled at once.
	Concurrency int
}

// SetupWithManager registers every controller of the provider with mgr.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	opts := controller.Options{MaxConcurrentReconciles: o.Concurrency}
	c := mgr.GetClient()
	for _, r := range []interface {
		SetupWithManager(ctrl.Manager, controller.Options) error
	}{
		&ClusterReconciler{Client: c, Cloud: o.Cloud},
		&MachineReconciler{Client: c, Cloud: o.Cloud},
		&MachinePoolReconciler{Client: c, Cloud: o.Cloud},
		&NetworkReconciler{Client: c, Cloud: o.Cloud, ClusterCache: o.ClusterCache},
	} {
		if err := r.SetupWithManager(mgr, opts); err != nil {
			return err
		}
	}
	return nil
}
