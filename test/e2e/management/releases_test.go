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

package management

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drone/envsubst/v2"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

// TestReleasesRunOnNodes checks the repository a management cluster is
// initialised from against what its nodes do with it: every Deployment of
// every provider's components (Cluster API's, cert-manager's, upstream's
// bootstrap provider, this one and the simulated provider) runs an image the
// nodes carry, pulled only if absent (there is no registry), and every
// image's entrypoint is a binary this machine runs.
func TestReleasesRunOnNodes(t *testing.T) {
	images := map[string]string{}
	for _, i := range rel.Images {
		images[i.Ref] = i.Path
	}
	files, err := filepath.Glob(filepath.Join(rel.Repository, "*", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	deployments := 0
	for _, f := range files {
		if base := filepath.Base(f); !strings.HasSuffix(base, "components.yaml") && base != testbin.CertManagerManifest {
			continue // metadata and cluster templates
		}
		for _, o := range readComponents(t, f) {
			if o.GetKind() != "Deployment" {
				continue
			}
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
				t.Fatal(err)
			}
			deployments++
			for _, c := range d.Spec.Template.Spec.Containers {
				if _, ok := images[c.Image]; !ok {
					t.Errorf("%s: Deployment %s runs %s, which no release image is", f, d.Name, c.Image)
				}
				if c.ImagePullPolicy != corev1.PullIfNotPresent {
					t.Errorf("%s: Deployment %s pulls %s %q; nodes have no registry to pull from", f, d.Name, c.Image, c.ImagePullPolicy)
				}
			}
		}
	}
	// Cluster API core, KubeadmControlPlane, both bootstrap providers,
	// the simulated provider and cert-manager's three.
	if deployments != 8 {
		t.Errorf("the repository holds %d Deployments, want 8", deployments)
	}
	for ref, file := range images {
		t.Run(ref, func(t *testing.T) { runEntrypoint(t, ref, file) })
	}
}

// runEntrypoint extracts an image's entrypoint and runs it with --help.
func runEntrypoint(t *testing.T, ref, file string) {
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Config.Entrypoint) != 1 {
		t.Fatalf("entrypoint %q, want one binary", cfg.Config.Entrypoint)
	}
	entrypoint := strings.TrimPrefix(cfg.Config.Entrypoint[0], "/")
	r := mutate.Extract(img)
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("the image has no %s", entrypoint)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != entrypoint {
			continue
		}
		bin := filepath.Join(t.TempDir(), filepath.Base(entrypoint))
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", entrypoint, err, tail(out, 10))
		}
		return
	}
}

// readComponents reads a components file as clusterctl installs it: its
// variables replaced, by their defaults where the file gives one.
func readComponents(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := envsubst.Eval(string(b), func(string) string { return "" })
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return decodeManifest(t, path, []byte(s))
}
