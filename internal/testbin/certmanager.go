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

import "path/filepath"

// CertManagerDir holds cert-manager's controller, webhook and cainjector and
// its install manifest (CertManagerManifest), built by hack/tools.sh
// cert-manager from its Go module.
func CertManagerDir() string {
	return filepath.Join(CacheDir(), "cert-manager", Versions["CERT_MANAGER_VERSION"]+"-"+Versions["CERT_MANAGER_BUILD"])
}

// CertManagerManifest is the name of cert-manager's install manifest in
// CertManagerDir, as its release names it.
const CertManagerManifest = "cert-manager.yaml"
