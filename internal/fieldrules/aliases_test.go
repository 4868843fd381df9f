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
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/hostile"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlsize"
)

// aliasPlace is one way extra Ignition configuration reaches the
// translators: the field its errors name and how to put a document there.
type aliasPlace struct {
	name, at string
	put      func(annotations map[string]string, s *bootstrapv1.KubeadmConfigSpec, doc string)
}

var aliasPlaces = []aliasPlace{
	{"Butane", "spec.ignition.butane.additionalConfig", func(_ map[string]string, s *bootstrapv1.KubeadmConfigSpec, doc string) {
		s.Ignition.Butane.AdditionalConfig = doc
	}},
	{"Container Linux Config", "spec.ignition.containerLinuxConfig.additionalConfig", func(_ map[string]string, s *bootstrapv1.KubeadmConfigSpec, doc string) {
		s.Ignition.ContainerLinuxConfig.AdditionalConfig = doc
	}},
	// As KubeadmControlPlane copies its machine template's annotations.
	{"Butane annotation", "metadata.annotations[" + bootstrapv1.IgnitionButaneAnnotation + "]", func(a map[string]string, s *bootstrapv1.KubeadmConfigSpec, doc string) {
		a[bootstrapv1.FormatAnnotation] = string(bootstrapv1.Ignition)
		a[bootstrapv1.IgnitionButaneAnnotation] = doc
		s.Format = bootstrapv1.CloudConfig
	}},
}

// validateAt validates a spec of format with doc put at place, as admission
// does, and returns the errors and what it allocated.
func validateAt(place aliasPlace, doc string, format bootstrapv1.Format, g featuregate.FeatureGate) (field.ErrorList, uint64) {
	annotations := map[string]string{}
	spec := joinSpec(format)
	place.put(annotations, spec, doc)
	var errs field.ErrorList
	alloc := hostile.Allocated(func() {
		_, errs, _ = ValidateAnnotated(annotations, spec, g, field.NewPath("metadata", "annotations"), field.NewPath("spec"))
	})
	return errs, alloc
}

// TestAliasDocumentsAreRefusedWithinTheirBound: a Butane or Container Linux
// Config document of 30 KiB that expands to 2.7 GB is refused
// at its field, naming the bound, and costs a few MiB; with the Ignition gate
// off it is refused for the gate alone and not read at all.
func TestAliasDocumentsAreRefusedWithinTheirBound(t *testing.T) {
	bomb := hostile.AliasBomb(14<<10, 100, 1900)
	for _, place := range aliasPlaces {
		t.Run(place.name, func(t *testing.T) {
			start := time.Now()
			errs, alloc := validateAt(place, bomb, bootstrapv1.Ignition, gates(t, true, false))
			msg := errs.ToAggregate()
			if msg == nil || !strings.Contains(msg.Error(), place.at) || !strings.Contains(msg.Error(), strconv.Itoa(yamlsize.ExtraIgnitionConfig)) {
				t.Fatalf("got %v, want a refusal at %s naming %d bytes", msg, place.at, yamlsize.ExtraIgnitionConfig)
			}
			if strings.Contains(msg.Error(), "xxxx") {
				t.Errorf("the refusal quotes the document: %v", msg)
			}
			if alloc > 16<<20 || time.Since(start) > 2*time.Second {
				t.Errorf("refusing it took %s and %d MiB", time.Since(start), alloc>>20)
			}

			errs, alloc = validateAt(place, bomb, bootstrapv1.Ignition, gates(t, false, false))
			if len(errs) != 1 || !strings.Contains(errs[0].Detail, string(bootstrapv1.Ignition)) || !strings.Contains(errs[0].Detail, "feature gate") {
				t.Fatalf("gate off: got %v, want the gate's refusal only", errs)
			}
			if alloc > 1<<20 {
				t.Errorf("gate off: refusing it allocated %d KiB: the document was read", alloc>>10)
			}
		})
	}
}

// FuzzExtraIgnitionConfigAliases sends documents of every shape of anchors
// and aliases (hostile.AliasDocument) through admission's rules at each
// place extra Ignition configuration is given: each is translated or
// refused, never at a cost far beyond its bound.
func FuzzExtraIgnitionConfigAliases(f *testing.F) {
	f.Add(uint8(0), []byte{1, 2, 3})
	f.Add(uint8(1), []byte{3, 8, 8, 8, 8, 8, 8, 8, 8})
	f.Add(uint8(2), []byte{0, 13, 13, 13, 13, 13, 13, 13})
	f.Add(uint8(0), []byte("storage files systemd passwd"))
	g := gates(f, true, false)
	f.Fuzz(func(t *testing.T, where uint8, program []byte) {
		place := aliasPlaces[int(where)%len(aliasPlaces)]
		doc := hostile.AliasDocument(program)
		if len(doc) == 0 {
			return
		}
		_, alloc := validateAt(place, doc, bootstrapv1.Ignition, g)
		// The translators' trees take a small multiple of what a document
		// expands to; the bound keeps that to a few dozen MiB.
		if alloc > 128<<20 {
			t.Fatalf("%s: a %d-byte document cost %d MiB", place.name, len(doc), alloc>>20)
		}
	})
}
