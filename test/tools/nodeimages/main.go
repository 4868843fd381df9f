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

// Command nodeimages builds the container images the e2e nodes run, without a
// registry or a container engine: every image `kubeadm config images list`
// names for a Kubernetes release of versions.env (kube-apiserver,
// kube-controller-manager, kube-scheduler, kube-proxy, etcd, CoreDNS, pause),
// tagged exactly as kubeadm prints them, from the binaries hack/tools.sh built
// from source, plus the tests' own busybox image. Each is a docker-archive
// tarball; a containerd root with all of them imported and unpacked (the
// seed) is written beside them, so that a node's containerd starts from a
// copy of it instead of unpacking every image again.
//
// hack/tools.sh node-images runs it (as root: the seed needs a containerd);
// internal/testbin finds what it wrote.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/release/ociimage"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/repodir"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// testImageRef names the tests' busybox image; nothing pulls it.
const testImageRef = "localhost/cabpk-e2e/busybox:v1"

func main() {
	version := flag.String("kubernetes-version", testbin.DefaultRelease().Kubernetes, "the Kubernetes release whose images to build (versions.env names the releases)")
	out := flag.String("out", "", "directory to write the images, their manifest and the containerd seed into (default: where internal/testbin finds the release's)")
	flag.Parse()
	release, err := testbin.ReleaseOf(*version)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodeimages: %v\n", err)
		os.Exit(2)
	}
	if *out == "" {
		*out = release.NodeImagesDir()
	}
	if err := run(release, *out); err != nil {
		fmt.Fprintf(os.Stderr, "nodeimages: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "[nodeimages] "+format+"\n", args...) }

func run(release testbin.Release, out string) error {
	if _, err := release.LoadNodeImages(); err == nil && out == release.NodeImagesDir() {
		return nil // built already
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	refs, err := kubeadmImages(release)
	if err != nil {
		return err
	}
	manifest := testbin.NodeImages{}
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	for _, w := range wanted(refs) {
		start := time.Now()
		img, err := imageFor(release, w.builder, w.ref, platform)
		if err != nil {
			return fmt.Errorf("%s: %w", w.ref, err)
		}
		tag, err := name.NewTag(w.ref)
		if err != nil {
			return err
		}
		file := w.component + ".tar"
		if err := tarball.WriteToFile(filepath.Join(out, file), tag, img); err != nil {
			return fmt.Errorf("writing %s: %w", w.ref, err)
		}
		logf("%s (%s) in %s", w.ref, file, time.Since(start).Round(time.Millisecond))
		manifest.Images = append(manifest.Images, testbin.NodeImage{Component: w.component, Ref: w.ref, File: file})
	}
	if manifest.ContainerdVersion, err = seed(out, manifest.Images); err != nil {
		return fmt.Errorf("the containerd seed: %w", err)
	}
	b, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return err
	}
	// Written last: its presence says the directory is complete.
	return os.WriteFile(filepath.Join(out, testbin.NodeImagesManifest), b, 0o644)
}

// kubeadmImages asks the release's kubeadm which images its version runs.
func kubeadmImages(release testbin.Release) ([]string, error) {
	kubeadm, err := release.Path(testbin.Kubeadm)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(kubeadm, "config", "images", "list", "--kubernetes-version", release.Kubernetes)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubeadm config images list: %w: %s", err, stderr.Bytes())
	}
	return strings.Fields(string(b)), nil
}

// frameworkPause is the pause image by the tag Cluster API's e2e framework
// runs its drain spec's Pods from; nodes have it as a cloud's image would.
const frameworkPause = "registry.k8s.io/pause:3.10.1"

// image is one image to write: its name in the manifest, the component
// that builds it, and its reference.
type image struct{ component, builder, ref string }

// wanted is every image: kubeadm's, the tests' busybox, and the framework's
// pause.
func wanted(kubeadmRefs []string) []image {
	var images []image
	for _, ref := range kubeadmRefs {
		images = append(images, image{component: componentOf(ref), builder: componentOf(ref), ref: ref})
	}
	return append(images,
		image{component: testbin.TestImage, builder: testbin.TestImage, ref: testImageRef},
		image{component: testbin.FrameworkPauseImage, builder: "pause", ref: frameworkPause})
}

// componentOf is the last element of an image's repository:
// registry.k8s.io/coredns/coredns:v1.14.2 -> coredns.
func componentOf(ref string) string {
	repo, _, _ := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	return repo
}

const binDir = "usr/local/bin"

func imageFor(release testbin.Release, component, ref string, platform v1.Platform) (v1.Image, error) {
	_, tag, _ := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	config := v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, WorkingDir: "/"}
	entries := []ociimage.Entry{
		ociimage.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")),
		ociimage.File("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")),
		ociimage.Dir("tmp", 0o1777),
	}
	var binary string
	switch component {
	case "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd", "coredns":
		tool := map[string]string{
			"kube-apiserver": testbin.KubeAPIServer, "kube-controller-manager": testbin.KubeControllerManager,
			"kube-scheduler": testbin.KubeScheduler, "kube-proxy": testbin.KubeProxy, "etcd": testbin.Etcd, "coredns": testbin.CoreDNS,
		}[component]
		p, err := release.Path(tool)
		if err != nil {
			return nil, err
		}
		if err := checkVersion(component, p, tag); err != nil {
			return nil, err
		}
		binary = p
	case "pause":
		dir, err := os.MkdirTemp("", "pause-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "pause")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -buildid=", "-o", binary, "./tools/nodeimages/pause")
		cmd.Dir = repodir.TestModule()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building pause: %w\n%s", err, b)
		}
	case testbin.TestImage:
		busybox, err := busyboxEntries()
		if err != nil {
			return nil, err
		}
		entries = append(entries, busybox...)
		config.Entrypoint = []string{"/bin/sh"}
	default:
		return nil, fmt.Errorf("kubeadm asks for an image this builder does not know how to make (component %q)", component)
	}
	if binary != "" {
		// Where the real images have their entrypoints: CoreDNS and pause at
		// the root (kubeadm's CoreDNS Deployment runs the image's
		// entrypoint), the Kubernetes components and etcd on PATH (kubeadm's
		// manifests name the command).
		inImage := filepath.Join(binDir, component)
		if component == "coredns" || component == "pause" {
			inImage = component
		}
		e, err := ociimage.FromHost(inImage, binary)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
		config.Entrypoint = []string{"/" + inImage}
	}
	if component == "kube-proxy" {
		// kube-proxy's iptables mode runs iptables-restore and friends.
		ipt, err := iptablesEntries()
		if err != nil {
			return nil, err
		}
		entries = append(entries, ipt...)
	}
	layer, err := ociimage.Layer(entries)
	if err != nil {
		return nil, err
	}
	config.Labels = map[string]string{"org.opencontainers.image.title": component, "org.opencontainers.image.version": tag,
		"org.opencontainers.image.description": "built by test/tools/nodeimages for the e2e nodes, from binaries built from source"}
	return ociimage.Image([]v1.Layer{layer}, platform, config)
}

// checkVersion refuses a binary whose version is not the tag kubeadm asks for.
func checkVersion(component, binary, tag string) error {
	want := strings.TrimSuffix(tag, "-0") // etcd's image tags carry a build suffix
	args := []string{"--version"}
	if component == "coredns" {
		args = []string{"-version"}
	}
	b, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", binary, strings.Join(args, " "), err, b)
	}
	got := string(b)
	if !strings.Contains(got, strings.TrimPrefix(want, "v")) {
		return fmt.Errorf("%s reports %q, but kubeadm asks for %s: change its version in internal/testbin/versions.env", binary, strings.TrimSpace(got), tag)
	}
	return nil
}

// iptablesEntries are this machine's iptables (Debian's xtables-nft-multi),
// its extensions and the shared libraries they load, at the same paths.
func iptablesEntries() ([]ociimage.Entry, error) {
	const multi = "/usr/sbin/xtables-nft-multi"
	files := []string{multi}
	exts, _ := filepath.Glob("/usr/lib/*-linux-gnu/xtables/*.so")
	if len(exts) == 0 {
		return nil, errors.New("no iptables extensions in /usr/lib/*-linux-gnu/xtables: install Debian's iptables (hack/tools.sh does)")
	}
	files = append(files, exts...)
	libs, err := sharedLibraries(files)
	if err != nil {
		return nil, err
	}
	var entries []ociimage.Entry
	for _, f := range append(append(files, libs...), "/etc/protocols", "/etc/ethertypes") {
		e, err := ociimage.FromHost(f, f)
		if errors.Is(err, os.ErrNotExist) && strings.HasPrefix(f, "/etc/") {
			continue
		}
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	for _, tool := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		entries = append(entries, ociimage.Symlink("usr/sbin/"+tool, "xtables-nft-multi"))
	}
	return entries, nil
}

// sharedLibraries lists the libraries ldd says the files load, the dynamic
// loader included.
func sharedLibraries(files []string) ([]string, error) {
	seen := map[string]bool{}
	for _, f := range files {
		out, err := exec.Command("ldd", f).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", f, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			for _, field := range strings.Fields(sc.Text()) {
				if strings.HasPrefix(field, "/") {
					seen[field] = true
				}
			}
		}
	}
	libs := make([]string, 0, len(seen))
	for l := range seen {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return libs, nil
}

// busyboxEntries are Debian's static busybox with a link per applet.
func busyboxEntries() ([]ociimage.Entry, error) {
	const busybox = "/bin/busybox"
	e, err := ociimage.FromHost("bin/busybox", busybox)
	if err != nil {
		return nil, fmt.Errorf("%w: install Debian's busybox-static (hack/tools.sh does)", err)
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list: %w", err)
	}
	entries := []ociimage.Entry{e}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			entries = append(entries, ociimage.Symlink("bin/"+applet, "busybox"))
		}
	}
	return entries, nil
}

// seed imports every tarball into a fresh containerd root, unpacked with the
// overlayfs snapshotter nodes use, and returns containerd's version.
func seed(out string, images []testbin.NodeImage) (string, error) {
	start := time.Now()
	archives := make([]host.ImageArchive, 0, len(images))
	for _, img := range images {
		archives = append(archives, host.ImageArchive{Ref: img.Ref, Path: filepath.Join(out, img.File)})
	}
	version, err := host.ImportImages(filepath.Join(out, testbin.NodeImagesSeedDir), archives)
	if err != nil {
		return "", err
	}
	logf("imported %d images into the seed in %s", len(images), time.Since(start).Round(time.Millisecond))
	return version, nil
}
