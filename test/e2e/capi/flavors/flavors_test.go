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

package flavors

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// dataDir is where hack/e2eflavors writes the templates.
var dataDir = filepath.Join("..", "data", "infrastructure-simulated")

// TestCommittedTemplatesAreCurrent regenerates every template and compares it
// with the committed file: a change to the stack's builders must be
// regenerated (make generate) for the specs to apply it.
func TestCommittedTemplatesAreCurrent(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names(files) {
		committed, err := os.ReadFile(filepath.Join(dataDir, name))
		if err != nil {
			t.Errorf("%s: %v (run make generate)", name, err)
			continue
		}
		if !bytes.Equal(committed, files[name]) {
			t.Errorf("%s differs from what the stack's builders make: run make generate", name)
		}
	}
	written, err := filepath.Glob(filepath.Join(dataDir, "cluster*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(files) {
		t.Errorf("%d templates in %s, the builders make %d: remove the stale ones", len(written), dataDir, len(files))
	}
}

// TestTemplatesLeaveNoSentinel checks that every number and version standing
// for a variable became the variable, and that every document parses.
func TestTemplatesLeaveNoSentinel(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names(files) {
		s := string(files[name])
		for _, v := range []string{"987001", "987002", "v1.36"} {
			if strings.Contains(s, v) {
				t.Errorf("%s still holds %q", name, v)
			}
		}
		for _, v := range []string{"${CLUSTER_NAME}", "${KUBERNETES_VERSION}", "${CONTROL_PLANE_MACHINE_COUNT}"} {
			if strings.HasPrefix(name, "cluster-template") && !strings.Contains(s, v) {
				t.Errorf("%s lacks %s", name, v)
			}
		}
		for i, doc := range strings.Split(s, "\n---\n")[1:] {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj["kind"] == nil {
				t.Errorf("%s document %d: %v", name, i+1, err)
			}
		}
	}
}

// TestConfigListsEveryTemplate checks that the e2e config copies every
// template into the clusterctl repository: clusterctl finds no other.
func TestConfigListsEveryTemplate(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join("..", "config", "simulated.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names(files) {
		if !strings.Contains(string(config), "sourcePath: ../data/infrastructure-simulated/"+name+"\n") {
			t.Errorf("config/simulated.yaml does not copy %s into the repository", name)
		}
	}
}
