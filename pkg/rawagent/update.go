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
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
)

// KubeletFlagsPath is the file kubeadm writes the kubelet's flags to, and
// KubeletConfigPath its configuration.
const (
	KubeletFlagsPath  = "/var/lib/kubelet/kubeadm-flags.env"
	KubeletConfigPath = "/var/lib/kubelet/config.yaml"
)

// DefaultKubeletHealthz is the kubelet's health endpoint as kubeadm
// configures it, and DefaultKubeletHealthTimeout how long an update waits
// for it after a restart.
const (
	DefaultKubeletHealthz       = "http://127.0.0.1:10248/healthz"
	DefaultKubeletHealthTimeout = time.Minute
)

// kubeadmKubeletFlags are the kubelet flags kubeadm itself writes (its
// kubelet phase's own, before the spec's kubeletExtraArgs override them).
var kubeadmKubeletFlags = []string{"container-runtime-endpoint", "hostname-override", "register-with-taints"}

// Update applies a NodeUpdate document to a machine that has joined, so
// that it ends as a machine freshly bootstrapped from the same spec: the
// files, a new Kubernetes version's kubeadm and kubelet when the node runs
// another, then (on control planes) the static Pod manifests kubeadm writes
// from the cluster's kubeadm-config ConfigMap, the kubelet's configuration
// and flags, and a restart of the kubelet. Each step can run again: a
// retry after a failure starts over. The result names the step that
// failed and says what failed without file contents.
func (a *Agent) Update(ctx context.Context, doc []byte) rawv1.NodeUpdateResult {
	u, err := ParseNodeUpdate(doc)
	if err != nil {
		return rawv1.NodeUpdateResult{Step: rawv1.StepRead, Message: err.Error()}
	}
	res := rawv1.NodeUpdateResult{Digest: u.Digest}
	// What the kubelet ran with, put back if it cannot run with the update.
	var saved *kubeletBackup
	var replaced *installedBinary
	for _, s := range []struct {
		step rawv1.UpdateStep
		run  func() error
	}{
		{rawv1.StepFiles, func() error { return a.updateFiles(u) }},
		{rawv1.StepBinaries, func() (err error) {
			replaced, err = a.updateBinaries(ctx, u)
			return err
		}},
		{rawv1.StepControlPlane, func() error { return a.updateControlPlane(ctx, u) }},
		{rawv1.StepKubeletConfig, func() (err error) {
			if saved, err = a.saveKubelet(); err != nil {
				return err
			}
			saved.binary = replaced
			if err = a.updateKubelet(ctx, u); err != nil {
				if rerr := saved.restore(); rerr != nil {
					return fmt.Errorf("%w; putting the previous kubelet files back: %v", err, rerr)
				}
			}
			return err
		}},
		{rawv1.StepKubeletRestart, func() error { return a.restartKubelet(ctx, saved) }},
	} {
		if err := s.run(); err != nil {
			res.Step, res.Message = s.step, err.Error()
			return res
		}
	}
	return res
}

// ParseNodeUpdate reads a NodeUpdate document and checks its digest.
func ParseNodeUpdate(doc []byte) (*rawv1.NodeUpdate, error) {
	u := &rawv1.NodeUpdate{}
	if err := json.Unmarshal(doc, u); err != nil {
		return nil, fmt.Errorf("the document is not a NodeUpdate: %v", err)
	}
	if u.APIVersion != rawv1.GroupVersion || u.Kind != rawv1.NodeUpdateKind {
		return nil, fmt.Errorf("the document is %s %s, not %s %s", u.APIVersion, u.Kind, rawv1.GroupVersion, rawv1.NodeUpdateKind)
	}
	if digest, err := u.ComputeDigest(); err != nil || digest != u.Digest {
		return nil, errors.New("the document does not match its digest")
	}
	return u, nil
}

// updateFiles writes the spec's files as a first boot does; a file that
// appends does so once.
func (a *Agent) updateFiles(u *rawv1.NodeUpdate) error {
	root, err := a.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range u.Files {
		content := f.Content
		if f.Append {
			old, err := readAll(root, f.Path)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("file %s: %w", f.Path, err)
			}
			if bytes.HasSuffix(old, content) {
				continue
			}
			content = append(old, content...)
		}
		if err := a.writeFile(root, rawv1.File{Path: f.Path, Owner: f.Owner, Permissions: f.Permissions, Content: string(content)}); err != nil {
			return err
		}
	}
	return nil
}

// updateControlPlane writes the control plane's static Pod manifests again
// from the cluster's configuration (which KubeadmControlPlane updated),
// without renewing certificates.
func (a *Agent) updateControlPlane(ctx context.Context, u *rawv1.NodeUpdate) error {
	if !u.ControlPlane {
		return nil
	}
	return a.kubeadm(ctx, u, "upgrade", "node", "phase", "control-plane", "--certificate-renewal=false")
}

// updateKubelet writes the kubelet's configuration from the cluster's
// kubelet-config ConfigMap and the spec's patches, then its flags as
// kubeadm's kubelet phase writes them: kubeadm's own, sorted, then the
// spec's kubeletExtraArgs, which replace any of kubeadm's of the same name.
func (a *Agent) updateKubelet(ctx context.Context, u *rawv1.NodeUpdate) error {
	if err := a.kubeadm(ctx, u, "upgrade", "node", "phase", "kubelet-config"); err != nil {
		return err
	}
	root, err := a.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	old, err := readAll(root, KubeletFlagsPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", KubeletFlagsPath, err)
	}
	have, err := parseKubeletFlags(old)
	if err != nil {
		return fmt.Errorf("%s: %w", KubeletFlagsPath, err)
	}
	extra, err := a.resolveArgs(have, u)
	if err != nil {
		return err
	}
	return write(root, KubeletFlagsPath, kubeletFlags(have, extra), 0o644, nil)
}

// resolveArgs gives templated flags their values: the one the machine's
// flag has (its first boot filled it with facts that do not change), or,
// for a flag it does not have yet, the declared placeholders filled from
// the agent's Metadata.
func (a *Agent) resolveArgs(have []rawv1.Arg, u *rawv1.NodeUpdate) ([]rawv1.Arg, error) {
	out := make([]rawv1.Arg, 0, len(u.KubeletExtraArgs))
	for _, arg := range u.KubeletExtraArgs {
		if !arg.Templated {
			out = append(out, arg)
			continue
		}
		if i := slices.IndexFunc(have, func(h rawv1.Arg) bool { return h.Name == arg.Name }); i >= 0 {
			out = append(out, rawv1.Arg{Name: arg.Name, Value: have[i].Value})
			continue
		}
		v := arg.Value
		for _, ph := range u.Placeholders {
			if m, ok := a.Metadata[ph.Metadata]; ok && strings.Contains(v, ph.Text) {
				v = strings.ReplaceAll(v, ph.Text, m)
			}
		}
		if strings.Contains(v, "{{") {
			return nil, fmt.Errorf("kubelet flag --%s is templated with facts of the machine it has no value for yet", arg.Name)
		}
		out = append(out, rawv1.Arg{Name: arg.Name, Value: v})
	}
	return out, nil
}

// KubeletFlags is the kubeadm flags file of a node whose current file is
// current and whose spec gives extra: kubeadm's own flags kept from
// current, sorted by name, without those extra replaces, then extra.
func KubeletFlags(current []byte, extra []rawv1.Arg) ([]byte, error) {
	have, err := parseKubeletFlags(current)
	if err != nil {
		return nil, err
	}
	return kubeletFlags(have, extra), nil
}

// kubeletFlags is KubeletFlags of the flags the current file has.
func kubeletFlags(have, extra []rawv1.Arg) []byte {
	var kept []rawv1.Arg
	for _, arg := range have {
		replaced := slices.ContainsFunc(extra, func(e rawv1.Arg) bool { return e.Name == arg.Name })
		if slices.Contains(kubeadmKubeletFlags, arg.Name) && !replaced {
			kept = append(kept, arg)
		}
	}
	slices.SortStableFunc(kept, func(x, y rawv1.Arg) int { return strings.Compare(x.Name, y.Name) })
	all := make([]string, 0, len(kept)+len(extra))
	for _, arg := range append(kept, extra...) {
		all = append(all, "--"+arg.Name+"="+arg.Value)
	}
	return []byte("KUBELET_KUBEADM_ARGS=" + strconv.Quote(strings.Join(all, " ")) + "\n")
}

// parseKubeletFlags reads a kubeadm flags file: one variable holding a
// quoted list of --name=value flags.
func parseKubeletFlags(b []byte) ([]rawv1.Arg, error) {
	content := strings.TrimSpace(string(b))
	if content == "" {
		return nil, nil
	}
	quoted, ok := strings.CutPrefix(content, "KUBELET_KUBEADM_ARGS=")
	if !ok {
		return nil, errors.New("not a kubeadm flags file")
	}
	value, err := strconv.Unquote(quoted)
	if err != nil {
		return nil, fmt.Errorf("the flags are not quoted as kubeadm quotes them: %v", err)
	}
	var args []rawv1.Arg
	for _, f := range strings.Fields(value) {
		name, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		args = append(args, rawv1.Arg{Name: name, Value: v})
	}
	return args, nil
}

// restartKubelet restarts the kubelet, which reads its configuration and
// flags only when it starts, and waits until it is healthy. A kubelet that
// does not become healthy gets back what it ran with before: a node whose
// kubelet is down could not even report the update's failure.
func (a *Agent) restartKubelet(ctx context.Context, saved *kubeletBackup) error {
	systemctl := a.Systemctl
	if systemctl == "" {
		systemctl = "systemctl"
	}
	if err := a.command(ctx, systemctl, "restart", "kubelet"); err != nil {
		return err
	}
	if err := a.kubeletHealthy(ctx); err == nil {
		return nil
	}
	if err := saved.restore(); err != nil {
		return fmt.Errorf("the kubelet did not become healthy with the update, and its previous configuration could not be put back: %w", err)
	}
	if err := a.command(ctx, systemctl, "restart", "kubelet"); err != nil {
		return err
	}
	return errors.New("the kubelet did not become healthy with the update; it runs with its previous configuration and flags again")
}

// kubeletHealthy waits for the kubelet's health endpoint to answer ok.
func (a *Agent) kubeletHealthy(ctx context.Context) error {
	url, timeout := a.KubeletHealthz, a.KubeletHealthTimeout
	if url == "" {
		url = DefaultKubeletHealthz
	}
	if timeout == 0 {
		timeout = DefaultKubeletHealthTimeout
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true, nil
			}
			err = fmt.Errorf("%s answered %s", url, resp.Status)
		}
		// Not up yet: keep polling, and say why at the end.
		last = err
		return false, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("the kubelet is not healthy: %w", last)
	}
	return err
}

// kubeletFiles are what the kubelet step writes and a failed restart puts
// back.
var kubeletFiles = []string{KubeletFlagsPath, KubeletConfigPath}

// kubeletBackup is the kubelet's files as they were before an update; nil
// content: the file did not exist. binary is the kubelet an update to
// another Kubernetes version replaced.
type kubeletBackup struct {
	a      *Agent
	files  map[string][]byte
	binary *installedBinary
}

func (a *Agent) saveKubelet() (*kubeletBackup, error) {
	root, err := a.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	b := &kubeletBackup{a: a, files: map[string][]byte{}}
	for _, p := range kubeletFiles {
		content, err := readAll(root, p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("saving %s: %w", p, err)
		}
		b.files[p] = content
	}
	return b, nil
}

// restore writes the saved files back (kubeadm writes both 0644).
func (b *kubeletBackup) restore() error {
	if b == nil {
		return errors.New("nothing was saved")
	}
	root, err := b.a.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	for p, content := range b.files {
		if content == nil {
			if err := root.Remove(inRoot(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		if err := write(root, p, content, 0o644, nil); err != nil {
			return err
		}
	}
	return b.binary.restore()
}

// kubeadm runs kubeadm with the spec's patches directory.
func (a *Agent) kubeadm(ctx context.Context, u *rawv1.NodeUpdate, args ...string) error {
	if u.PatchesDirectory != "" {
		args = append(args, "--patches", a.path(u.PatchesDirectory))
	}
	return a.command(ctx, a.kubeadmCommand(), append(args, a.ExtraArgs...)...)
}

// command runs a command; the error names it and its exit status (its
// output goes to the agent's Stdout and Stderr).
func (a *Agent) command(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = a.Stdout, a.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// readAll reads a file beneath root.
func readAll(root fileTree, p string) ([]byte, error) {
	f, err := root.OpenFile(inRoot(p), 0, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(f)
	return b.Bytes(), err
}
