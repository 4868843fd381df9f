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

// Package capi runs Cluster API's own e2e specs (sigs.k8s.io/cluster-api/test
// v1.14.2), unchanged, against this provider in every format, the way an
// infrastructure provider's suite runs them: Cluster API's framework over the
// e2e stack's management cluster, a clusterctl local repository made by the
// framework from config/simulated.yaml, and the simulated provider's
// templates in data/. The suite's files carry the e2e build tag (Cluster
// API's MachinePool spec needs it); `make test-e2e-capi` runs them.
package capi
