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

// Package feature holds this provider's feature gates. They are set with the
// manager's --feature-gates flag; the shipped manifests fill that flag from
// clusterctl variables (EXP_KUBEADM_BOOTSTRAP_FORMAT_*).
package feature

import (
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/component-base/featuregate"
)

const (
	// KubeadmBootstrapFormatIgnition enables `spec.format: ignition`
	// (Ignition v3 for Flatcar).
	//
	// alpha: v0.1
	KubeadmBootstrapFormatIgnition featuregate.Feature = "KubeadmBootstrapFormatIgnition"

	// KubeadmBootstrapFormatRaw enables `spec.format: raw` (kubeadm configuration
	// only, for agents that run kubeadm themselves).
	//
	// alpha: v0.1
	KubeadmBootstrapFormatRaw featuregate.Feature = "KubeadmBootstrapFormatRaw"

	// KubeadmInPlaceUpdates makes the manager serve Cluster API's in-place
	// update hooks (CanUpdateMachine, CanUpdateMachineSet, UpdateMachine) on
	// its webhook server, for an ExtensionConfig the operator registers. It
	// needs Cluster API's InPlaceUpdates and RuntimeSDK gates.
	//
	// alpha: v0.1
	KubeadmInPlaceUpdates featuregate.Feature = "KubeadmInPlaceUpdates"

	// MachinePool lets the controller bootstrap KubeadmConfigs owned by
	// MachinePools (and watch MachinePools, whose CRD must then be installed),
	// as Cluster API's gate of the same name does.
	//
	// beta: v0.1
	MachinePool featuregate.Feature = "MachinePool"

	// PriorityQueue makes the controller use controller-runtime's priority
	// queue (new and changed objects before periodic resyncs), as Cluster
	// API's gate of the same name does.
	//
	// beta: v0.1
	PriorityQueue featuregate.Feature = "PriorityQueue"

	// ReconcilerRateLimiting reconciles each KubeadmConfig at most once a
	// second and backs off exponentially on errors, as Cluster API's gate of
	// the same name does. It needs PriorityQueue.
	//
	// beta: v0.1
	ReconcilerRateLimiting featuregate.Feature = "ReconcilerRateLimiting"
)

// EnvVar returns the clusterctl variable that sets a gate in the shipped
// manifests, so that error messages can tell users how to turn it on.
func EnvVar(f featuregate.Feature) string {
	return envVars[f]
}

var envVars = map[featuregate.Feature]string{
	KubeadmBootstrapFormatIgnition: "EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION",
	KubeadmBootstrapFormatRaw:      "EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW",
	KubeadmInPlaceUpdates:          "EXP_KUBEADM_IN_PLACE_UPDATES",
	MachinePool:                    "EXP_MACHINE_POOL",
	PriorityQueue:                  "EXP_PRIORITY_QUEUE",
	ReconcilerRateLimiting:         "EXP_RECONCILER_RATE_LIMITING",
}

// NewFeatureGates returns a fresh gate set with this provider's gates at their
// defaults. Every user (a manager, the render CLI, a test) has its own set:
// there is no global one to leak settings between them.
func NewFeatureGates() featuregate.MutableFeatureGate {
	g := featuregate.NewFeatureGate()
	runtime.Must(g.Add(defaultGates))
	return g
}

var defaultGates = map[featuregate.Feature]featuregate.FeatureSpec{
	KubeadmBootstrapFormatIgnition: {Default: false, PreRelease: featuregate.Alpha},
	KubeadmBootstrapFormatRaw:      {Default: false, PreRelease: featuregate.Alpha},
	KubeadmInPlaceUpdates:          {Default: false, PreRelease: featuregate.Alpha},
	MachinePool:                    {Default: true, PreRelease: featuregate.Beta},
	PriorityQueue:                  {Default: true, PreRelease: featuregate.Beta},
	ReconcilerRateLimiting:         {Default: true, PreRelease: featuregate.Beta},
}
