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
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

// TestRatchetKeepsStoredObjectsWritable: an Ignition config with partition
// percentages (diskLayout) is admitted by upstream's provider, refused here.
// Stored under upstream, it stays writable here for what else changes
// (labels as KubeadmControlPlane syncs them, other spec fields), on a Machine's
// config with and without its data; changing the refused field, or adding a
// second such field, is checked in full; a create is always.
func TestRatchetKeepsStoredObjectsWritable(t *testing.T) {
	gates := feature.NewFeatureGates()
	if err := gates.SetFromMap(map[string]bool{string(feature.KubeadmBootstrapFormatIgnition): true}); err != nil {
		t.Fatal(err)
	}
	w := &KubeadmConfig{Gates: gates}
	stored := &bootstrapv1.KubeadmConfig{}
	stored.Name = "upstream-made"
	stored.Spec.Format = bootstrapv1.Ignition
	stored.Spec.DiskSetup.Partitions = []upstreambootstrapv1.Partition{{Device: "/dev/sdb", DiskLayout: []upstreambootstrapv1.PartitionSpec{{Percentage: 50}}}}
	if _, err := w.ValidateCreate(context.Background(), stored); err == nil || !strings.Contains(err.Error(), "diskLayout") {
		t.Fatalf("creating it here must be refused at diskLayout: %v", err)
	}
	for _, withData := range []bool{false, true} {
		old := stored.DeepCopy()
		if withData {
			old.Status.DataSecretName = old.Name
		}
		edits := []struct {
			name   string
			edit   func(c *bootstrapv1.KubeadmConfig)
			refuse string // the path of the error, or "" to admit
		}{
			{"a label", func(c *bootstrapv1.KubeadmConfig) { c.Labels = map[string]string{"synced": "by-kcp"} }, ""},
			{"another spec field", func(c *bootstrapv1.KubeadmConfig) { c.Spec.JoinConfiguration.NodeRegistration.Name = "n" }, ""},
			{"the token the controller records", func(c *bootstrapv1.KubeadmConfig) {
				c.Spec.JoinConfiguration.Discovery.BootstrapToken.Token = "abcdef.0123456789abcdef"
			}, ""},
			{"the refused field itself", func(c *bootstrapv1.KubeadmConfig) {
				c.Spec.DiskSetup.Partitions[0].DiskLayout[0].Percentage = 60
			}, "spec.diskSetup.partitions[0].diskLayout"},
			{"a second partition with a layout", func(c *bootstrapv1.KubeadmConfig) {
				c.Spec.DiskSetup.Partitions = append(c.Spec.DiskSetup.Partitions,
					upstreambootstrapv1.Partition{Device: "/dev/sdc", DiskLayout: []upstreambootstrapv1.PartitionSpec{{Percentage: 10}}})
			}, "spec.diskSetup.partitions[1].diskLayout"},
		}
		for _, e := range edits {
			updated := old.DeepCopy()
			e.edit(updated)
			_, err := w.ValidateUpdate(context.Background(), old, updated)
			switch {
			case e.refuse == "" && err != nil:
				t.Errorf("data=%v, %s: refused: %v", withData, e.name, err)
			case e.refuse != "" && (err == nil || !strings.Contains(err.Error(), e.refuse)):
				t.Errorf("data=%v, %s: want a refusal at %s, got %v", withData, e.name, e.refuse, err)
			}
		}
	}
}

// TestLookupResolvesPrintedPaths: the paths field.Path prints resolve in the
// JSON of the object they were reported on.
func TestLookupResolvesPrintedPaths(t *testing.T) {
	c := &bootstrapv1.KubeadmConfig{}
	c.Annotations = map[string]string{"example.com/key.with.dots": "v"}
	c.Spec.Files = []upstreambootstrapv1.File{{Path: "/a"}, {Path: "/b"}}
	tree := jsonTree(c)
	for path, want := range map[*field.Path]any{
		field.NewPath("metadata", "annotations").Key("example.com/key.with.dots"): "v",
		field.NewPath("spec", "files").Index(1).Child("path"):                     "/b",
	} {
		if got, ok := lookup(tree, path.String()); !ok || got != want {
			t.Errorf("%s: %v %v, want %v", path, got, ok, want)
		}
	}
	if _, ok := lookup(tree, field.NewPath("spec", "files").Index(2).Child("path").String()); ok {
		t.Error("an index past the end resolved")
	}
}

// TestRatchetChecksWhatAnUpdateChanges: an object stored with a problem the
// ratchet keeps (a format whose gate is off now, an annotation naming no
// format) is still checked in full for what an update changes: each of
// these edits is refused at its field.
func TestRatchetChecksWhatAnUpdateChanges(t *testing.T) {
	gates := feature.NewFeatureGates() // every format gate off
	w := &KubeadmConfig{Gates: gates}
	gatedFormat := &bootstrapv1.KubeadmConfig{}
	gatedFormat.Spec.Format = bootstrapv1.Ignition
	badAnnotation := &bootstrapv1.KubeadmConfig{}
	badAnnotation.Annotations = map[string]string{bootstrapv1.FormatAnnotation: "no-such-format"}
	file := func(f upstreambootstrapv1.File) func(c *bootstrapv1.KubeadmConfig) {
		return func(c *bootstrapv1.KubeadmConfig) { c.Spec.Files = append(c.Spec.Files, f) }
	}
	edits := []struct {
		name string
		edit func(c *bootstrapv1.KubeadmConfig)
		at   string
	}{
		{"a duplicate path", func(c *bootstrapv1.KubeadmConfig) {
			c.Spec.Files = []upstreambootstrapv1.File{{Path: "/a", Content: "x"}, {Path: "/a", Content: "y"}}
		}, "spec.files[1].path"},
		{"content with contentFrom", file(upstreambootstrapv1.File{Path: "/b", Content: "x",
			ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "s", Key: "k"}}}), "spec.files[0]"},
		{"content that is not base64", file(upstreambootstrapv1.File{Path: "/c", Encoding: upstreambootstrapv1.Base64, Content: "not base64!"}), "spec.files[0].content"},
		{"a mode that is not one", file(upstreambootstrapv1.File{Path: "/d", Content: "x", Permissions: "0999"}), "spec.files[0].permissions"},
	}
	for _, stored := range []*bootstrapv1.KubeadmConfig{gatedFormat, badAnnotation} {
		if _, err := w.ValidateUpdate(context.Background(), stored, stored.DeepCopy()); err != nil {
			t.Fatalf("an update that changes nothing: %v", err)
		}
		for _, e := range edits {
			updated := stored.DeepCopy()
			e.edit(updated)
			_, err := w.ValidateUpdate(context.Background(), stored, updated)
			if err == nil || !strings.Contains(err.Error(), e.at) {
				t.Errorf("format %q, annotations %v, %s: want a refusal at %s, got %v", stored.Spec.Format, stored.Annotations, e.name, e.at, err)
			}
		}
	}
}

// TestRatchetKeepsWhatItCannotLocate: an error at a path that resolves in
// neither object (a required field missing from both) is not one the update
// left as it was.
func TestRatchetKeepsWhatItCannotLocate(t *testing.T) {
	c := &bootstrapv1.KubeadmConfig{}
	missing := field.ErrorList{field.Required(field.NewPath("spec", "joinConfiguration", "discovery", "file", "kubeConfigPath"), "")}
	if kept := ratchet(missing, missing, c, c.DeepCopy()); len(kept) != 1 {
		t.Errorf("kept %v", kept)
	}
	present := field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "x", "")}
	c.Name = "x"
	if kept := ratchet(present, present, c, c.DeepCopy()); len(kept) != 0 {
		t.Errorf("an unchanged field's error kept: %v", kept)
	}
}
