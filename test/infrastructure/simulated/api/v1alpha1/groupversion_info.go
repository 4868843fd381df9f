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

// Package v1alpha1 is the API of the simulated infrastructure provider that the
// e2e stack and the demo use: clusters and machines whose "hosts" are
// namespaced processes on this machine (test/infrastructure/simulated/host).
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.simulated.cabpk-formats.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "infrastructure.simulated.cabpk-formats.io", Version: "v1alpha1"}

	schemeBuilder = runtime.NewSchemeBuilder(func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypes(GroupVersion,
			&SimulatedCluster{}, &SimulatedClusterList{},
			&SimulatedMachine{}, &SimulatedMachineList{},
			&SimulatedMachineTemplate{}, &SimulatedMachineTemplateList{},
			&SimulatedClusterTemplate{}, &SimulatedClusterTemplateList{},
			&SimulatedMachinePool{}, &SimulatedMachinePoolList{},
			&SimulatedMachinePoolTemplate{}, &SimulatedMachinePoolTemplateList{},
		)
		metav1.AddToGroupVersion(scheme, GroupVersion)
		return nil
	})

	// AddToScheme registers this API's kinds in a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
