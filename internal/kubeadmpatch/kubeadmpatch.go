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

// Package kubeadmpatch says which files are kubeadm's patches: kubeadm reads
// every file directly in a configuration's patches.directory as part of its
// configuration. The raw format carries such files (and only those) from
// spec.files, so admission and the raw renderer ask it the same question.
package kubeadmpatch

import "path/filepath"

// In is true when a file at path is one of the patches kubeadm reads from
// directory: absolute, directly inside it.
func In(path, directory string) bool {
	if directory == "" || !filepath.IsAbs(path) || !filepath.IsAbs(directory) {
		return false
	}
	return filepath.Dir(filepath.Clean(path)) == filepath.Clean(directory)
}
