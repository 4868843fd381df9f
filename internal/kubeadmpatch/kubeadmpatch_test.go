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

package kubeadmpatch

import "testing"

func TestIn(t *testing.T) {
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{"/etc/kubeadm/patches/kubeletconfiguration+merge.yaml", "/etc/kubeadm/patches", true},
		{"/etc/kubeadm/patches/etcd.yaml", "/etc/kubeadm/patches/", true},
		{"/etc/kubeadm/patches/../kubeadm.yaml", "/etc/kubeadm/patches", false},
		{"/etc/kubeadm/patches/sub/etcd.yaml", "/etc/kubeadm/patches", false}, // kubeadm reads no subdirectory
		{"/etc/kubeadm/patches", "/etc/kubeadm/patches", false},
		{"/etc/kubeadm/patches/etcd.yaml", "", false},
		{"etc/kubeadm/patches/etcd.yaml", "etc/kubeadm/patches", false},
	} {
		if got := In(tc.path, tc.dir); got != tc.want {
			t.Errorf("In(%q, %q) = %v, want %v", tc.path, tc.dir, got, tc.want)
		}
	}
}
