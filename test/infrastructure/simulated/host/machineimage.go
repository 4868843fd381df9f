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

package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A machine image is what a host boots: the node image of a release and a
// containerd store. A cloud keeps several, one per use; AddMachineImage
// adds one whose store holds more images than the node image's, as an image
// for a management cluster's nodes has its providers' images baked in (there
// is no registry to pull them from). Like a cloud's image family, it comes
// for every release of the Lab: its store for a release other than the
// first is made when a host of that release first boots it.

// machineImage is one machine image: the archives baked in, and its store
// for each release made so far, by Kubernetes version.
type machineImage struct {
	archives []ImageArchive
	stores   map[string]string
}

// ImageArchive is a container image as a docker-archive tarball.
type ImageArchive struct {
	// Ref is the image's tag, as Pods name it.
	Ref string
	// Path is the tarball on this machine.
	Path string
}

// machineImagesDir holds the machine images' containerd stores in a Lab's
// state directory.
const machineImagesDir = "machine-images"

// AddMachineImage makes the machine image name: the node image with the
// archives' images imported into a copy of its store. Hosts boot it when
// their spec names it; Close removes it.
func (l *Lab) AddMachineImage(name string, archives []ImageArchive) error {
	if name == "" || strings.ContainsAny(name, "/.") {
		return fmt.Errorf("machine image %q: a name is one path element", name)
	}
	l.imagesMu.Lock()
	defer l.imagesMu.Unlock()
	img := &machineImage{archives: archives, stores: map[string]string{}}
	if _, err := l.makeImageStore(name, img, l.releases[0]); err != nil {
		return err
	}
	l.images[name] = img
	return nil
}

// storeFor is the containerd store a host boots: its release's, or that of
// the machine image its spec names, made for the release if need be.
func (l *Lab) storeFor(spec HostSpec, release *labRelease) (string, error) {
	if spec.Image == "" {
		return release.store, nil
	}
	l.imagesMu.Lock()
	defer l.imagesMu.Unlock()
	img, ok := l.images[spec.Image]
	if !ok {
		return "", fmt.Errorf("host %s: no machine image %q in the lab", spec.Name, spec.Image)
	}
	if store, ok := img.stores[release.KubernetesVersion]; ok {
		return store, nil
	}
	return l.makeImageStore(spec.Image, img, release)
}

// makeImageStore makes a machine image's store for a release: a copy of
// the release's store with the image's archives imported.
func (l *Lab) makeImageStore(name string, img *machineImage, release *labRelease) (string, error) {
	store := filepath.Join(l.stateDir, machineImagesDir, name, release.KubernetesVersion, "containerd")
	if err := os.RemoveAll(store); err != nil {
		return "", err
	}
	if err := copySeed(release.store, store); err != nil {
		return "", fmt.Errorf("machine image %s of Kubernetes %s: %w", name, release.KubernetesVersion, err)
	}
	if _, err := ImportImages(store, img.archives); err != nil {
		return "", fmt.Errorf("machine image %s of Kubernetes %s: %w", name, release.KubernetesVersion, err)
	}
	img.stores[release.KubernetesVersion] = store
	return store, nil
}

// removeMachineImages removes what AddMachineImage made.
func (l *Lab) removeMachineImages() error {
	l.imagesMu.Lock()
	l.images = map[string]*machineImage{}
	l.imagesMu.Unlock()
	return os.RemoveAll(filepath.Join(l.stateDir, machineImagesDir))
}

// ImportImages imports archives into the containerd root at root (made if
// missing), unpacked with the overlayfs snapshotter nodes use, through a
// containerd of its own, and returns that containerd's version.
func ImportImages(root string, archives []ImageArchive) (string, error) {
	version, err := exec.Command("containerd", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("containerd --version: %w", err)
	}
	state, err := os.MkdirTemp("", "import-images-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(state)
	sock := filepath.Join(state, "containerd.sock")
	config := filepath.Join(state, "config.toml")
	// Only what importing needs: content, metadata, the overlayfs snapshotter.
	toml := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = %q\n",
		root, filepath.Join(state, "state"), sock)
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		return "", err
	}
	var logs bytes.Buffer
	daemon := exec.Command("containerd", "--config", config)
	daemon.Stdout, daemon.Stderr = &logs, &logs
	daemon.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := daemon.Start(); err != nil {
		return "", err
	}
	defer func() {
		_ = daemon.Process.Signal(syscall.SIGTERM)
		_ = daemon.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ctr := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := ctr("version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("containerd did not answer within 30s:\n%s", logs.String())
		}
	}
	for _, a := range archives {
		if b, err := ctr("images", "import", a.Path); err != nil {
			return "", fmt.Errorf("ctr images import %s: %w\n%s", a.Path, err, b)
		}
	}
	listed, err := ctr("images", "list", "--quiet")
	if err != nil {
		return "", fmt.Errorf("ctr images list: %w\n%s", err, listed)
	}
	var missing []error
	for _, a := range archives {
		if !bytes.Contains(listed, []byte(a.Ref)) {
			missing = append(missing, fmt.Errorf("%s is not in the store after importing %s", a.Ref, a.Path))
		}
	}
	return strings.TrimSpace(string(version)), errors.Join(missing...)
}

// ImportImage imports an image into a running host's containerd, where its
// kubelet finds it, as a site preloads images or a mirror serves them.
func (h *Host) ImportImage(a ImageArchive) error {
	b, err := os.ReadFile(a.Path)
	if err != nil {
		return err
	}
	if out, err := h.execWithInput(b, "ctr", "--namespace", "k8s.io", "images", "import", "-"); err != nil {
		return fmt.Errorf("ctr images import %s on %s: %w\n%s", a.Ref, h.Name, err, out)
	}
	return nil
}
