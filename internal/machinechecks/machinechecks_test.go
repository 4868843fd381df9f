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

package machinechecks_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/machinechecks"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/hostile"
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

// TestDecodingIsBounded: a gzip value of 1 MiB that inflates to 1 GiB (the
// shape that, in a Secret named by contentFrom, took the manager over its
// memory limit) is refused once MaxContent bytes came out, having allocated
// a few MiB, not the GiB.
func TestDecodingIsBounded(t *testing.T) {
	bomb := string(hostile.GzipBomb(1024))
	for _, enc := range []upstreambootstrapv1.Encoding{upstreambootstrapv1.Gzip, upstreambootstrapv1.GzipBase64} {
		content := bomb
		if enc == upstreambootstrapv1.GzipBase64 {
			content = base64.StdEncoding.EncodeToString([]byte(bomb))
		}
		var err error
		allocated := hostile.Allocated(func() { _, err = machinechecks.Decode(enc, content) })
		if err == nil {
			t.Errorf("%s: a 1-GiB bomb decoded", enc)
		}
		var budget machinechecks.Budget
		allocated += hostile.Allocated(func() { err = budget.Decodes(field.NewPath("spec", "files").Index(0), enc, content) })
		var ce *machinechecks.ContentError
		if !errors.As(err, &ce) || !ce.OverBudget || ce.Field.String() != "spec.files[0]" {
			t.Errorf("%s: %v, want the budget's error at spec.files[0]", enc, err)
		}
		if limit := uint64(16 * machinechecks.MaxContent); allocated > limit {
			t.Errorf("%s: allocated %d MiB decoding a bomb, want at most %d", enc, allocated>>20, limit>>20)
		}
	}
}

// TestFilesBoundTheirTotal: admission decodes inline content, so many small
// files that each inflate to a few MiB (200 of 10 KiB made seconds of CPU
// and GiBs of allocation per request) are refused once their total is over
// MaxContent, with one error at the file where it went over; files within
// the bound pass.
func TestFilesBoundTheirTotal(t *testing.T) {
	bombs := make([]upstreambootstrapv1.File, 200)
	for i := range bombs {
		bombs[i] = upstreambootstrapv1.File{Path: fmt.Sprintf("/etc/f%d", i), Encoding: upstreambootstrapv1.GzipBase64, Content: hostile.GzipBombBase64(7)}
		if len(bombs[i].Content) > 10240 {
			t.Fatalf("a file's content is %d bytes, over the CRD's 10240", len(bombs[i].Content))
		}
	}
	var errs field.ErrorList
	start := time.Now()
	allocated := hostile.Allocated(func() { errs = machinechecks.Files(bombs, field.NewPath("spec", "files")) })
	if len(errs) != 1 || errs[0].Field != "spec.files[0].content" || !strings.Contains(errs[0].Detail, "1048576 bytes in all") {
		t.Errorf("errors %v, want one at spec.files[0].content naming the bound", errs)
	}
	if limit := uint64(8 * machinechecks.MaxContent); allocated > limit {
		t.Errorf("allocated %d MiB, want at most %d", allocated>>20, limit>>20)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("took %s", elapsed)
	}

	// Within the bound: 100 files of 10 KiB and one more up to 1 MiB in
	// all; one byte more is over, at that file.
	var files []upstreambootstrapv1.File
	for i := range 100 {
		files = append(files, upstreambootstrapv1.File{Path: fmt.Sprintf("/etc/g%d", i), Content: strings.Repeat("x", machinechecks.MaxContent/100)})
	}
	rest := machinechecks.MaxContent - 100*(machinechecks.MaxContent/100)
	files = append(files, upstreambootstrapv1.File{Path: "/etc/rest", Content: strings.Repeat("y", rest)})
	if errs := machinechecks.Files(files, field.NewPath("spec", "files")); len(errs) > 0 {
		t.Errorf("content within the bound refused: %v", errs)
	}
	files[100].Content += "y"
	if errs := machinechecks.Files(files, field.NewPath("spec", "files")); len(errs) != 1 || errs[0].Field != "spec.files[100].content" {
		t.Errorf("one byte over: %v", errs)
	}
	// What a gzip value inflates to counts, not its size.
	files[100] = upstreambootstrapv1.File{Path: "/etc/rest", Encoding: upstreambootstrapv1.Gzip, Content: string(gzipped(t, bytes.Repeat([]byte("y"), rest+1)))}
	if errs := machinechecks.Files(files, field.NewPath("spec", "files")); len(errs) != 1 || errs[0].Field != "spec.files[100].content" {
		t.Errorf("decoding one byte over: %v", errs)
	}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzDecode: whatever the content and its encoding, decoding never yields
// more than MaxContent bytes, never takes more than a few times the bound
// and its input in memory, and a budget fed the same content twice never
// books more than the bound without saying so.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(0), []byte("hello"))
	f.Add(uint8(1), []byte(base64.StdEncoding.EncodeToString([]byte("hello"))))
	f.Add(uint8(2), hostile.GzipBomb(2))
	f.Add(uint8(3), []byte(hostile.GzipBombBase64(2)))
	f.Add(uint8(2), []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"))
	encodings := []upstreambootstrapv1.Encoding{"", upstreambootstrapv1.Base64, upstreambootstrapv1.Gzip, upstreambootstrapv1.GzipBase64}
	f.Fuzz(func(t *testing.T, encoding uint8, content []byte) {
		enc := encodings[int(encoding)%len(encodings)]
		var out []byte
		var err error
		allocated := hostile.Allocated(func() { out, err = machinechecks.Decode(enc, string(content)) })
		if err == nil && len(out) > machinechecks.MaxContent {
			t.Fatalf("%s: decoded %d bytes", enc, len(out))
		}
		if limit := uint64(8*machinechecks.MaxContent + 8*len(content)); allocated > limit {
			t.Fatalf("%s: allocated %d bytes for %d of input", enc, allocated, len(content))
		}
		var budget machinechecks.Budget
		at := field.NewPath("spec", "files")
		first, second := budget.Decodes(at.Index(0), enc, string(content)), budget.Decodes(at.Index(1), enc, string(content))
		if (first == nil) != (err == nil) {
			t.Fatalf("%s: Decode says %v, the budget %v", enc, err, first)
		}
		if first == nil && second == nil && 2*len(out) > machinechecks.MaxContent {
			t.Fatalf("%s: the budget took 2×%d bytes without a word", enc, len(out))
		}
	})
}
