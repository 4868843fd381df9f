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

package claims

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/supportedversions"
)

// Where the Kubernetes version sits: in a Machine (CanUpdateMachine) and
// in a MachineSet (CanUpdateMachineSet).
var (
	MachineVersion    = []string{"spec", "version"}
	MachineSetVersion = []string{"spec", "template", "spec", "version"}
)

// Version returns a JSON merge patch that gives the object the desired
// Kubernetes version at path, when a machine can move there in place: a
// later patch of its minor or the next minor, both supported (kubeadm
// upgrades one minor at a time, never down). The patch is empty when the
// versions are equal or the move is not one kubeadm upgrade takes.
func Version(current, desired string, path []string) (runtimehooksv1.Patch, error) {
	if current == desired || !Upgradable(current, desired) {
		return runtimehooksv1.Patch{}, nil
	}
	patch := map[string]any{}
	if err := unstructured.SetNestedField(patch, desired, path...); err != nil {
		return runtimehooksv1.Patch{}, fmt.Errorf("claiming the version: %w", err)
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return runtimehooksv1.Patch{}, err
	}
	return runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONMergePatchType, Patch: b}, nil
}

// Upgradable reports whether kubeadm upgrades a node of version current to
// desired: the same major, a later version of the same or the next minor,
// both supported.
func Upgradable(current, desired string) bool {
	if supportedversions.Check(current) != nil || supportedversions.Check(desired) != nil {
		return false
	}
	c, err := semver.ParseTolerant(current)
	if err != nil {
		return false
	}
	d, err := semver.ParseTolerant(desired)
	if err != nil {
		return false
	}
	return d.Major == c.Major && d.GT(c) && d.Minor <= c.Minor+1
}

// graduatedGates are kubeadm feature gates that are locked on from a
// version on, when kubeadm no longer takes them. KubeadmControlPlane sets
// ControlPlaneKubeletLocalMode only for the versions before: a machine
// that had it on is as a fresh machine of the later version once it moves
// there, so the gate's removal comes with the version.
var graduatedGates = map[string]semver.Version{"ControlPlaneKubeletLocalMode": {Major: 1, Minor: 36}}

// featureGatesPath is where kubeadm's feature gates sit in a spec.
var featureGatesPath = []string{"clusterConfiguration", "featureGates"}

// claimGraduatedGates adds to changes the removal of the gates current has
// on and desired drops that are locked on at movesTo.
func claimGraduatedGates(current, desired map[string]any, movesTo string, changes map[string]any) error {
	if movesTo == "" {
		return nil
	}
	to, err := semver.ParseTolerant(movesTo)
	if err != nil {
		return fmt.Errorf("the version machines move to, %q, is not a version", movesTo)
	}
	c, _ := lookup(current, featureGatesPath)
	currentGates, _ := c.(map[string]any)
	d, _ := lookup(desired, featureGatesPath)
	desiredGates, _ := d.(map[string]any)
	var dropped []string
	for gate, from := range graduatedGates {
		on, _ := currentGates[gate].(bool)
		_, kept := desiredGates[gate]
		if on && !kept && to.GTE(from) {
			dropped = append(dropped, gate)
		}
	}
	if len(dropped) == 0 {
		return nil
	}
	if len(dropped) == len(currentGates) && desiredGates == nil {
		// Nothing left: an empty object would still differ.
		return unstructured.SetNestedField(changes, nil, featureGatesPath...)
	}
	for _, gate := range dropped {
		if err := unstructured.SetNestedField(changes, nil, append(slices.Clone(featureGatesPath), gate)...); err != nil {
			return err
		}
	}
	return nil
}
