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

package webhooks

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ratchet drops from errs, the errors of an updated object, each one the old
// object had too (same type, same field) at a field whose value the update
// leaves as it was. Objects stored before a rule existed, or admitted by
// upstream's provider, whose admission is more lenient, stay writable for
// whatever else changes (KubeadmControlPlane's label sync, clusterctl move, an
// annotation), as Kubernetes ratchets CRD validation; what an update changes
// is checked in full, and creates always are. oldDoc and newDoc are the two
// objects (as structs or as JSON) the errors' paths resolve in.
func ratchet(errs, oldErrs field.ErrorList, oldDoc, newDoc any) field.ErrorList {
	if len(errs) == 0 || len(oldErrs) == 0 {
		return errs
	}
	had := map[string]bool{}
	for _, e := range oldErrs {
		had[string(e.Type)+" "+e.Field] = true
	}
	oldTree, newTree := jsonTree(oldDoc), jsonTree(newDoc)
	var kept field.ErrorList
	for _, e := range errs {
		if had[string(e.Type)+" "+e.Field] && oldTree != nil && newTree != nil {
			// A path that resolves in neither object says nothing about
			// what the update left as it was: it counts as changed.
			ov, oldOK := lookup(oldTree, e.Field)
			nv, newOK := lookup(newTree, e.Field)
			if oldOK && newOK && reflect.DeepEqual(ov, nv) {
				continue
			}
		}
		kept = append(kept, e)
	}
	return kept
}

// jsonTree is doc as generic JSON (maps, slices, scalars); nil if it cannot be.
func jsonTree(doc any) any {
	raw, ok := doc.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(doc); err != nil {
			return nil
		}
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil
	}
	return tree
}

// lookup resolves a field path as field.Path prints it ("spec.files[2].path",
// "metadata.annotations[example.com/key]") in a JSON tree.
func lookup(tree any, path string) (any, bool) {
	cur := tree
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil, false
			}
			key := path[1:end]
			path = path[end+1:]
			switch c := cur.(type) {
			case []any:
				i, err := strconv.Atoi(key)
				if err != nil || i < 0 || i >= len(c) {
					return nil, false
				}
				cur = c[i]
			case map[string]any:
				v, ok := c[key]
				if !ok {
					return nil, false
				}
				cur = v
			default:
				return nil, false
			}
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[path[:end]]; !ok {
				return nil, false
			}
			path = path[end:]
		}
	}
	return cur, true
}
