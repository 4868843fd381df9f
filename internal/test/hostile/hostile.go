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

// Package hostile makes the inputs a user with nothing but write access to
// KubeadmConfigs (and Secrets in their namespace) could give the provider to
// make it spend memory or time: compressed content that inflates far beyond
// its size. Tests use them to show that each such input is refused within a
// bound and costs no more than it.
package hostile

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"runtime"
	"sync"
)

// MiB of zeros is what one gzip member inflates to.
const memberSize = 1 << 20

// member is one gzip member of memberSize zeros (about 1 KiB), padded with a
// header comment so that its length is a multiple of 3: its base64 then has
// no padding, and members' base64 can be concatenated into valid base64.
var member = sync.OnceValue(func() []byte {
	for comment := 0; ; comment++ {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			panic(err)
		}
		zw.Comment = fmt.Sprintf("%*s", comment, "")
		if _, err := zw.Write(make([]byte, memberSize)); err != nil {
			panic(err)
		}
		if err := zw.Close(); err != nil {
			panic(err)
		}
		if buf.Len()%3 == 0 {
			return buf.Bytes()
		}
	}
})

// GzipBomb is gzip data (members of about 1 KiB each) that inflates to
// mebibytes MiB of zeros.
func GzipBomb(mebibytes int) []byte {
	return bytes.Repeat(member(), mebibytes)
}

// GzipBombBase64 is GzipBomb in standard base64, for encoding gzip+base64.
func GzipBombBase64(mebibytes int) string {
	return base64.StdEncoding.EncodeToString(GzipBomb(mebibytes))
}

// MemberBase64 is the base64 of one member of GzipBomb: a template that
// writes it n times renders the base64 of an n-MiB bomb.
func MemberBase64() string {
	return base64.StdEncoding.EncodeToString(member())
}

// Allocated returns the bytes f allocates, all of them, whether collected
// since or not: what an input cost, not what it left behind.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
