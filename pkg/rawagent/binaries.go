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

package rawagent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/blang/semver/v4"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
)

// maxBinarySize bounds a downloaded binary: kubeadm and kubelet are well
// under it, and a source that sends more is not a Kubernetes release.
const maxBinarySize = 512 << 20

// installedBinary is an executable as it was before an update replaced it.
type installedBinary struct {
	path    string
	content []byte
}

// updateBinaries installs the kubeadm and kubelet of the update's
// Kubernetes version when the node's kubelet is of another one, and returns
// the kubelet it replaced, to put back if the new one does not run. A
// document without a version moves nothing.
func (a *Agent) updateBinaries(ctx context.Context, u *rawv1.NodeUpdate) (*installedBinary, error) {
	if u.KubernetesVersion == "" {
		return nil, nil
	}
	want, err := semver.ParseTolerant(u.KubernetesVersion)
	if err != nil {
		return nil, fmt.Errorf("the update's Kubernetes version %q is not a version", u.KubernetesVersion)
	}
	kubelet, err := exec.LookPath(a.kubeletCommand())
	if err != nil {
		return nil, fmt.Errorf("finding the kubelet: %w", err)
	}
	running, err := a.kubeletVersion(ctx, kubelet)
	if err != nil {
		return nil, err
	}
	if running.Equals(want) {
		return nil, nil
	}
	if u.Binaries == nil {
		return nil, fmt.Errorf("the node's kubelet is v%s and the update asks for %s, but names no source for its binaries", running, u.KubernetesVersion)
	}
	kubeadm, err := exec.LookPath(a.kubeadmCommand())
	if err != nil {
		return nil, fmt.Errorf("finding kubeadm: %w", err)
	}
	old, err := os.ReadFile(kubelet)
	if err != nil {
		return nil, fmt.Errorf("saving the kubelet: %w", err)
	}
	// kubeadm first: a node whose kubelet is new must never be left with
	// an older kubeadm to upgrade it.
	for _, b := range []struct{ name, path string }{{"kubeadm", kubeadm}, {"kubelet", kubelet}} {
		if err := a.install(ctx, u, b.name, b.path); err != nil {
			return nil, err
		}
	}
	return &installedBinary{path: kubelet, content: old}, nil
}

// kubeletVersion asks a kubelet its version ("Kubernetes v1.36.3").
func (a *Agent) kubeletVersion(ctx context.Context, kubelet string) (semver.Version, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, kubelet, "--version")
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return semver.Version{}, fmt.Errorf("%s --version: %w", kubelet, err)
	}
	fields := strings.Fields(out.String())
	if len(fields) == 0 {
		return semver.Version{}, fmt.Errorf("%s --version printed no version", kubelet)
	}
	v, err := semver.ParseTolerant(fields[len(fields)-1])
	if err != nil {
		return semver.Version{}, fmt.Errorf("%s --version printed %q, not a version", kubelet, strings.TrimSpace(out.String()))
	}
	return v, nil
}

// install downloads one binary of the update's version, checks it against
// the SHA-256 published beside it, and puts it in place of path.
func (a *Agent) install(ctx context.Context, u *rawv1.NodeUpdate, name, path string) error {
	src, err := url.JoinPath(u.Binaries.URL, u.KubernetesVersion, "bin", "linux", runtime.GOARCH, name)
	if err != nil {
		return fmt.Errorf("the binaries' source is not a URL: %w", err)
	}
	content, err := a.download(ctx, src, maxBinarySize)
	if err != nil {
		return fmt.Errorf("downloading %s %s: %w", name, u.KubernetesVersion, err)
	}
	published, err := a.download(ctx, src+".sha256", 1024)
	if err != nil {
		return fmt.Errorf("downloading the checksum of %s %s: %w", name, u.KubernetesVersion, err)
	}
	sum := sha256.Sum256(content)
	if fields := strings.Fields(string(published)); len(fields) == 0 || !strings.EqualFold(fields[0], hex.EncodeToString(sum[:])) {
		return fmt.Errorf("%s %s does not match its published SHA-256", name, u.KubernetesVersion)
	}
	if err := write(machineRoot{}, path, content, 0o755, nil); err != nil {
		return fmt.Errorf("installing %s at %s: %w", name, path, err)
	}
	return nil
}

// download reads a URL whole, refusing more than limit bytes. Errors name
// the URL's host and path, never credentials it may carry.
func (a *Agent) download(ctx context.Context, src string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, errors.New("the binaries' source is not a URL")
	}
	shown := req.URL.Host + req.URL.Path
	client := a.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		// url.Error repeats the whole URL, credentials included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", shown, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", shown, limit)
	}
	return b, nil
}

// restore puts a replaced binary back.
func (b *installedBinary) restore() error {
	if b == nil {
		return nil
	}
	return write(machineRoot{}, b.path, b.content, 0o755, nil)
}

func (a *Agent) kubeadmCommand() string {
	if a.Kubeadm == "" {
		return "kubeadm"
	}
	return a.Kubeadm
}

func (a *Agent) kubeletCommand() string {
	if a.Kubelet == "" {
		return "kubelet"
	}
	return a.Kubelet
}
