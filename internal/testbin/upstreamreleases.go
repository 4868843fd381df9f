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

package testbin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// UpstreamReleases is what test/tools/upstreamreleases wrote: the images and the
// clusterctl repository of Cluster API's providers and of cert-manager at
// the pinned versions.
type UpstreamReleases struct {
	// Dir holds the image tarballs, the manifest and the repository.
	Dir    string      `json:"-"`
	Images []NodeImage `json:"images"`
}

// Repository is a clusterctl repository laid out as clusterctl reads a local
// one: <provider label>/<version>/<components file> and metadata.yaml, and
// cert-manager/<version>/cert-manager.yaml.
func (u *UpstreamReleases) Repository() string { return filepath.Join(u.Dir, UpstreamRepositoryDir) }

// Names of what test/tools/upstreamreleases writes into UpstreamReleasesDir.
const (
	UpstreamReleasesManifest = "releases.json"
	UpstreamRepositoryDir    = "repository"
)

// UpstreamReleasesDir is where test/tools/upstreamreleases writes for the pinned
// versions (hack/tools.sh upstream-releases).
func UpstreamReleasesDir() string {
	v := Versions
	return filepath.Join(CacheDir(), "upstream-releases", fmt.Sprintf("capi%s-certmanager%s-%s-r%s",
		v["CLUSTER_API_VERSION"], v["CERT_MANAGER_VERSION"], v["CERT_MANAGER_BUILD"], v["UPSTREAM_RELEASES_REVISION"]))
}

// LoadUpstreamReleases reads the manifest test/tools/upstreamreleases wrote last,
// once it finished.
func LoadUpstreamReleases() (*UpstreamReleases, error) {
	dir := UpstreamReleasesDir()
	b, err := os.ReadFile(filepath.Join(dir, UpstreamReleasesManifest))
	if err != nil {
		return nil, fmt.Errorf("the upstream releases are not built (%v): run hack/tools.sh upstream-releases", err)
	}
	u := &UpstreamReleases{Dir: dir}
	if err := json.Unmarshal(b, u); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, UpstreamReleasesManifest), err)
	}
	return u, nil
}
