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
// its size, and YAML whose aliases expand far beyond it. Tests use them to
// show that each such input is refused within a bound and costs no more than
// it.
package hostile

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
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

// AliasBombKey is the top-level key under which AliasBomb nests its anchors.
const AliasBombKey = "x-aliases"

// AliasBomb is a YAML mapping entry (AliasBombKey) holding an anchored
// scalar of leaf bytes and, for each fanout, an anchored sequence of that
// many aliases of the entry before: leaf times the product of fanouts when
// expanded. yaml.v2's alias guard (behind sigs.k8s.io/yaml) counts nodes,
// not bytes, and refuses a document when nearly every node it decoded came
// through an alias; a list of plain nodes in front, one for every 98 that
// aliases will bring, keeps it quiet. AliasBomb(14<<10, 100, 1900) is 30 KiB
// that expand to 2.7 GB. Appended to a Butane or Container Linux Config
// document it is an unknown key, which their translators report only after
// decoding it all.
func AliasBomb(leaf int, fanouts ...int) string {
	// The nodes decoding brings through aliases: each alias of a level
	// brings the level before it, itself and its aliases included.
	through, level := 0, 1
	for _, fanout := range fanouts {
		through += fanout * level
		level = 1 + fanout*(1+level)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n  p: [%s]\n", AliasBombKey, strings.TrimSuffix(strings.Repeat("0,", through/98+1), ","))
	fmt.Fprintf(&b, "  l0: &l0 %s\n", strings.Repeat("x", leaf))
	for l, fanout := range fanouts {
		aliases := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", l), fanout), ",")
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", l+1, l+1, aliases)
	}
	return b.String()
}

// AliasDocument turns program into a YAML mapping, for fuzzing what reads
// YAML: each byte adds one anchored entry whose value its bits choose (a
// scalar, or sequences and mappings of aliases to earlier entries, some
// repeating one alias up to 13 times), so that inputs grow towards alias
// bombs of every shape.
func AliasDocument(program []byte) string {
	var b strings.Builder
	anchors := 0
	for i, op := range program {
		name := fmt.Sprintf("k%d", i)
		ref := func(j int) string { return fmt.Sprintf("*a%d", j%max(anchors, 1)) }
		switch {
		case anchors == 0 || op%5 == 0:
			fmt.Fprintf(&b, "%s: &a%d %q\n", name, anchors, strings.Repeat("v", int(op)))
		case op%5 == 1:
			fmt.Fprintf(&b, "%s: &a%d [%s, %s]\n", name, anchors, ref(int(op)), ref(int(op)/3))
		case op%5 == 2:
			fmt.Fprintf(&b, "%s: &a%d {x: %s, y: %s}\n", name, anchors, ref(int(op)), ref(int(op)/7))
		case op%5 == 3:
			fmt.Fprintf(&b, "%s: &a%d [%s]\n", name, anchors, strings.TrimSuffix(strings.Repeat(ref(anchors-1)+", ", 1+int(op)%13), ", "))
		default:
			fmt.Fprintf(&b, "%s: &a%d {m: {x: 1}, n: %s}\n", name, anchors, ref(int(op)))
		}
		anchors++
	}
	return b.String()
}
