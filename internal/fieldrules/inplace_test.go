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

package fieldrules

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// TestInPlaceFieldsAreSpecFields: every field the table marks as changeable
// in place is a whole field of KubeadmConfigSpec, by its JSON names.
func TestInPlaceFieldsAreSpecFields(t *testing.T) {
	if len(InPlaceFields()) == 0 {
		t.Fatal("no field is changeable in place")
	}
	for _, f := range InPlaceFields() {
		if strings.Contains(f, "[]") {
			t.Errorf("%s: a field of list items cannot be claimed on its own", f)
			continue
		}
		typ := reflect.TypeFor[bootstrapv1.KubeadmConfigSpec]()
		for _, name := range strings.Split(f, ".") {
			field, ok := jsonField(typ, name)
			if !ok {
				t.Errorf("%s: %s has no field %q", f, typ, name)
				break
			}
			typ = field.Type
			for typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
		}
	}
}

// TestFirstBootFieldsRollOut: what only a machine's first boot applies is
// never changed in place.
func TestFirstBootFieldsRollOut(t *testing.T) {
	for _, f := range InPlaceFields() {
		for _, firstBoot := range []string{"format", "diskSetup", "mounts", "users", "ignition", "bootCommands", "preKubeadmCommands", "postKubeadmCommands", "ntp"} {
			if f == firstBoot || strings.HasPrefix(f, firstBoot+".") {
				t.Errorf("%s is marked in place, but only a first boot applies %s", f, firstBoot)
			}
		}
	}
	if !slices.Contains(InPlaceFields(), "files") {
		t.Error("files are not changeable in place")
	}
}

// jsonField finds the field of struct type typ (or of its embedded
// structs) whose JSON name is name.
func jsonField(typ reflect.Type, name string) (reflect.StructField, bool) {
	if typ.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			if inner, ok := jsonField(f.Type, name); ok {
				return inner, true
			}
			continue
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
