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

// Package ociimage builds container images from files without a container
// engine: one reproducible tar layer per call (every entry dated at the Unix
// epoch), on an empty base, written as docker-archive tarballs that
// `docker load`, `ctr images import` and `kind load image-archive` take. The
// release's manager image and the e2e nodes' images are made with it.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Epoch dates every file and the image itself, so the same inputs give the
// same image digest.
var Epoch = time.Unix(0, 0).UTC()

// Entry is one file, directory or symbolic link of a layer.
type Entry struct {
	// Path inside the image, relative (no leading slash).
	Path string
	// Mode holds the permission bits.
	Mode int64
	// Dir makes a directory; Link a symbolic link to that target;
	// otherwise the entry is a regular file with Content.
	Dir     bool
	Link    string
	Content []byte
	// UID and GID own the entry.
	UID, GID int
}

// File is a regular file entry.
func File(p string, mode int64, content []byte) Entry {
	return Entry{Path: p, Mode: mode, Content: content}
}

// Dir is a directory entry.
func Dir(p string, mode int64) Entry { return Entry{Path: p, Mode: mode, Dir: true} }

// Symlink is a symbolic link entry.
func Symlink(p, target string) Entry { return Entry{Path: p, Mode: 0o777, Link: target} }

// FromHost reads a file of this machine into an entry at p in the image,
// keeping its permission bits.
func FromHost(p, hostPath string) (Entry, error) {
	st, err := os.Stat(hostPath)
	if err != nil {
		return Entry{}, err
	}
	b, err := os.ReadFile(hostPath)
	if err != nil {
		return Entry{}, err
	}
	return File(p, int64(st.Mode().Perm()), b), nil
}

// Layer writes entries into one uncompressed tar layer. Parent directories
// that no entry names are added (0755); entries are sorted by path so that
// the layer's digest depends only on its content.
func Layer(entries []Entry) (v1.Layer, error) {
	byPath := map[string]Entry{}
	for _, e := range entries {
		e.Path = strings.TrimPrefix(path.Clean(e.Path), "/")
		if _, dup := byPath[e.Path]; dup {
			return nil, fmt.Errorf("%s is in the layer twice", e.Path)
		}
		byPath[e.Path] = e
	}
	for p := range byPath {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = Dir(d, 0o755)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := byPath[p]
		hdr := &tar.Header{Name: p, Mode: e.Mode, Uid: e.UID, Gid: e.GID, ModTime: Epoch, Format: tar.FormatPAX}
		switch {
		case e.Dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
		case e.Link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Link
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.Content))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Content); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

// Image is layers on an empty base with the given platform and
// configuration, dated at Epoch.
func Image(layers []v1.Layer, platform v1.Platform, config v1.Config) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = platform.OS, platform.Architecture, platform.Variant
	cfg.Created = v1.Time{Time: Epoch}
	cfg.Config = config
	return mutate.ConfigFile(img, cfg)
}

// The user a static binary's image runs as: distroless's nonroot, which
// Kubernetes' runAsNonRoot accepts without a runAsUser of its own.
const (
	NonRootUID = 65532
	NonRootGID = 65532
)

// StaticBinary is the image of one static binary at /name, run as the
// non-root user from /, with the passwd and group entries of that user, a
// home and /tmp, on an empty base: what distroless's static image gives a Go
// manager. Extra entries (another binary) go into the same layer.
func StaticBinary(binary []byte, name string, platform v1.Platform, labels map[string]string, extra ...Entry) (v1.Image, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootGID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootGID)
	home := Dir("home/nonroot", 0o700)
	home.UID, home.GID = NonRootUID, NonRootGID
	layer, err := Layer(append([]Entry{
		Dir("etc", 0o755),
		File("etc/passwd", 0o644, []byte(passwd)),
		File("etc/group", 0o644, []byte(group)),
		Dir("home", 0o755),
		home,
		Dir("tmp", 0o1777),
		File(name, 0o755, binary),
	}, extra...))
	if err != nil {
		return nil, err
	}
	return Image([]v1.Layer{layer}, platform, v1.Config{
		Entrypoint: []string{"/" + name},
		User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootGID),
		WorkingDir: "/",
		Labels:     labels,
	})
}
