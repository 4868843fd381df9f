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

// Package versions boots clusters of the oldest and the newest workload
// Kubernetes minor this provider supports, each on nodes of its own release
// (built from source by hack/tools.sh oldest-newest). Its tests carry the
// versionmatrix build tag: make test-versions runs them, beside the version
// matrix, and builds the releases first; make test does neither.
package versions
