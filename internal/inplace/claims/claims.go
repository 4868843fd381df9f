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

// Package claims decides which differences between a machine's current and
// desired bootstrap configuration this provider changes in place: those of
// the fields the rule table (internal/fieldrules) marks, and nothing else.
// Cluster API applies the patch to the current object and replaces the
// machine if any difference is left.
package claims

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
)

// Where the KubeadmConfigSpec sits: in a KubeadmConfig (CanUpdateMachine)
// and in a KubeadmConfigTemplate (CanUpdateMachineSet).
var (
	ConfigSpec   = []string{"spec"}
	TemplateSpec = []string{"spec", "template", "spec"}
)

// Claim returns a JSON merge patch that gives current, at every field
// changeable in place, desired's value; spec is where the KubeadmConfigSpec
// sits in both. movesTo is the Kubernetes version the machines move to in
// place, empty when it does not change: what that version implies is
// claimed with it (see graduatedGates). The patch is empty (IsDefined
// false) when no such field differs.
func Claim(current, desired runtime.RawExtension, spec []string, movesTo string) (runtimehooksv1.Patch, error) {
	cur, err := specOf(current.Raw, spec)
	if err != nil {
		return runtimehooksv1.Patch{}, fmt.Errorf("current bootstrap config: %w", err)
	}
	des, err := specOf(desired.Raw, spec)
	if err != nil {
		return runtimehooksv1.Patch{}, fmt.Errorf("desired bootstrap config: %w", err)
	}
	changes := map[string]any{}
	for _, f := range fieldrules.InPlaceFields() {
		path := strings.Split(f, ".")
		c, inCurrent := lookup(cur, path)
		d, inDesired := lookup(des, path)
		if inCurrent == inDesired && reflect.DeepEqual(c, d) {
			continue
		}
		if guard := guards[f]; guard != nil && !guard(c, d) {
			continue
		}
		if !inDesired {
			path = removed(cur, des, path)
		}
		if err := unstructured.SetNestedField(changes, mergeValue(c, d, inDesired), path...); err != nil {
			return runtimehooksv1.Patch{}, fmt.Errorf("claiming %s: %w", f, err)
		}
	}
	if err := claimGraduatedGates(cur, des, movesTo, changes); err != nil {
		return runtimehooksv1.Patch{}, err
	}
	if len(changes) == 0 {
		return runtimehooksv1.Patch{}, nil
	}
	patch := map[string]any{}
	if err := unstructured.SetNestedField(patch, changes, spec...); err != nil {
		return runtimehooksv1.Patch{}, err
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return runtimehooksv1.Patch{}, err
	}
	return runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONMergePatchType, Patch: b}, nil
}

// guards hold back the claim of a field for changes a running machine
// cannot take although the field can change in place.
var guards = map[string]func(current, desired any) bool{
	// A machine keeps a file the spec no longer lists; a fresh one would
	// not have it, so a removal rolls out.
	"files": keepsEveryPath,
}

// keepsEveryPath reports whether every file path in current is in desired.
func keepsEveryPath(current, desired any) bool {
	paths := map[any]bool{}
	for _, f := range asList(desired) {
		paths[f["path"]] = true
	}
	for _, f := range asList(current) {
		if !paths[f["path"]] {
			return false
		}
	}
	return true
}

// asList is a JSON list of objects; anything else is empty.
func asList(v any) []map[string]any {
	l, _ := v.([]any)
	out := make([]map[string]any, 0, len(l))
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// specOf decodes a bootstrap config object and returns its spec.
func specOf(raw []byte, spec []string) (map[string]any, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("missing")
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	s, found := lookup(obj, spec)
	if !found {
		return map[string]any{}, nil
	}
	m, ok := s.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", strings.Join(spec, "."))
	}
	return m, nil
}

// lookup returns the value at path below m; a path through something other
// than an object leads nowhere.
func lookup(m map[string]any, path []string) (any, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(m, path...)
	return v, found && err == nil
}

// removed is the path to remove from current so that a field desired
// lacks goes with the objects around it that desired lacks too and that hold
// nothing else: an empty object left behind would still differ.
func removed(current, desired map[string]any, path []string) []string {
	target := path
	for i := len(path) - 1; i >= 1; i-- {
		if _, ok := lookup(desired, path[:i]); ok {
			break
		}
		parent, _ := lookup(current, path[:i])
		if m, ok := parent.(map[string]any); !ok || len(m) != 1 {
			break
		}
		target = path[:i]
	}
	return target
}

// mergeValue is what a merge patch holds to turn current into desired:
// null removes a field, an object is merged key by key (so keys only
// current has are removed), anything else is replaced whole.
func mergeValue(current, desired any, inDesired bool) any {
	if !inDesired {
		return nil
	}
	c, currentIsObject := current.(map[string]any)
	d, desiredIsObject := desired.(map[string]any)
	if !currentIsObject || !desiredIsObject {
		return desired
	}
	out := map[string]any{}
	for k := range c {
		if _, ok := d[k]; !ok {
			out[k] = nil
		}
	}
	for k, v := range d {
		cv, inCurrent := c[k]
		if inCurrent && reflect.DeepEqual(cv, v) {
			continue
		}
		out[k] = mergeValue(cv, v, true)
	}
	return out
}
