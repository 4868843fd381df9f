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
