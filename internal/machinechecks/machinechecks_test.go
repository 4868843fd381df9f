package machinechecks_test

import (
	"strings"
	"testing"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
)

// TestIgnitionMountSource: what a mount unit mounts for each way cloud-init
// templates write a mount's source.
func TestIgnitionMountSource(t *testing.T) {
	labels := map[string]bool{"data": true}
	for _, tc := range []struct {
		mount upstreambootstrapv1.MountPoints
		want  string // "" means refused
	}{
		{upstreambootstrapv1.MountPoints{"/dev/sdb1", "/x"}, "/dev/sdb1"},
		{upstreambootstrapv1.MountPoints{"xvdb", "/x"}, "/dev/xvdb"},
		{upstreambootstrapv1.MountPoints{"nvme1n1p1", "/x", "ext4"}, "/dev/nvme1n1p1"},
		{upstreambootstrapv1.MountPoints{"LABEL=etcd", "/x"}, "/dev/disk/by-label/etcd"},
		{upstreambootstrapv1.MountPoints{"UUID=1234-abcd", "/x"}, "/dev/disk/by-uuid/1234-abcd"},
		{upstreambootstrapv1.MountPoints{"PARTLABEL=var", "/x"}, "/dev/disk/by-partlabel/var"},
		{upstreambootstrapv1.MountPoints{"data", "/x"}, "/dev/disk/by-label/data"},
		{upstreambootstrapv1.MountPoints{"tmpfs", "/x", "tmpfs", "size=1g"}, "tmpfs"},
		{upstreambootstrapv1.MountPoints{"scratch", "/x", "tmpfs"}, "scratch"},
		{upstreambootstrapv1.MountPoints{"nfs.example:/export", "/x", "nfs"}, "nfs.example:/export"},
		{upstreambootstrapv1.MountPoints{"ephemeral0", "/x"}, ""},
		{upstreambootstrapv1.MountPoints{"swap", "none", "swap"}, ""},
		{upstreambootstrapv1.MountPoints{"FOO=bar", "/x"}, ""},
	} {
		got, err := machinechecks.IgnitionMountSource(tc.mount, labels)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%v: mounted %q, want refused", tc.mount, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.mount, got, err, tc.want)
		}
	}
}

// TestDecodeNeverQuotesTheContent: what does not decode is said without the
// content, which may be a key.
func TestDecodeNeverQuotesTheContent(t *testing.T) {
	for _, enc := range []upstreambootstrapv1.Encoding{upstreambootstrapv1.Base64, upstreambootstrapv1.Gzip, upstreambootstrapv1.GzipBase64} {
		_, err := machinechecks.Decode(enc, "SECRET-KEY!!")
		if err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %v", enc, err)
		}
	}
	if b, err := machinechecks.Decode(upstreambootstrapv1.Base64, "aGVs\nbG8=\n"); err != nil || string(b) != "hello" {
		t.Errorf("base64 over lines: %q %v", b, err)
	}
}
