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
