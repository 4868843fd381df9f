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

// Package rawagent runs `raw` bootstrap data on a machine: what the agent of an
// agent-based infrastructure provider does once Cluster API hands it a data
// secret. It writes the files the data lists, runs kubeadm with the
// configuration (its placeholders filled with the machine's metadata) and
// writes Cluster API's success sentinel.
//
// The data is a data secret's Data map (keys `value`, `format`, `files`); see
// docs/agents/raw-format.md and the document types in bootstrap/kubeadm/api/raw/v1alpha1.
package rawagent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlsize"
)

// DefaultConfigPath is where the kubeadm configuration is written, the path
// the cloud-config format uses too.
const DefaultConfigPath = "/run/kubeadm/kubeadm.yaml"

// Agent runs raw bootstrap data. The zero value runs `kubeadm` from PATH on
// the real root.
type Agent struct {
	// Kubeadm is the kubeadm executable; empty means "kubeadm" from PATH.
	Kubeadm string
	// Systemctl restarts the kubelet after an in-place update; empty means
	// "systemctl" from PATH.
	Systemctl string
	// Kubelet is the kubelet executable an in-place update asks its
	// version and replaces with a new version's; empty means "kubelet"
	// from PATH.
	Kubelet string
	// HTTPClient downloads a new Kubernetes version's binaries; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
	// KubeletHealthz and KubeletHealthTimeout say where and how long an
	// in-place update waits for the restarted kubelet to be healthy; empty
	// means DefaultKubeletHealthz and DefaultKubeletHealthTimeout.
	KubeletHealthz       string
	KubeletHealthTimeout time.Duration
	// ExtraArgs are appended to kubeadm's arguments (e.g. "--v=5").
	ExtraArgs []string
	// ConfigPath is where the configuration is written for kubeadm; empty
	// means DefaultConfigPath. It is removed after kubeadm succeeded, because
	// it holds the bootstrap token.
	ConfigPath string
	// Root prefixes every path the agent writes (the files, the
	// configuration, the sentinel); empty means "/". Useful for tests; kubeadm
	// itself always works on the real root.
	Root string
	// Stdout and Stderr receive kubeadm's output; nil discards it.
	Stdout, Stderr io.Writer
	// Metadata is what this machine knows about itself (its hostname, its
	// instance id, ...), for the placeholders the data declares. Data that
	// declares a placeholder whose key is missing here is refused.
	Metadata map[rawv1.MetadataKey]string
}

// Plan is what the agent will do with a data secret.
type Plan struct {
	Action rawv1.Action
	// Config is the kubeadm configuration stream.
	Config []byte
	// Files are written before kubeadm runs.
	Files []rawv1.File
	// Placeholders are filled in Config with the machine's metadata.
	Placeholders []rawv1.Placeholder
}

var metadataValue = regexp.MustCompile(rawv1.MetadataValuePattern)

// Fill returns the configuration with every declared placeholder replaced
// by its metadata value.
func (p *Plan) Fill(metadata map[rawv1.MetadataKey]string) ([]byte, error) {
	config := p.Config
	for _, ph := range p.Placeholders {
		v, ok := metadata[ph.Metadata]
		if !ok {
			return nil, fmt.Errorf("the data needs the machine's %s (for %s), which this agent was not given", ph.Metadata, ph.Text)
		}
		if !metadataValue.MatchString(v) {
			return nil, fmt.Errorf("the machine's %s has characters a kubeadm configuration value cannot take as-is", ph.Metadata)
		}
		config = bytes.ReplaceAll(config, []byte(ph.Text), []byte(v))
	}
	return config, nil
}

// Parse reads a data secret's Data. It refuses data that is not raw.
func Parse(data map[string][]byte) (*Plan, error) {
	if f := string(data[rawv1.FormatKey]); f != "raw" {
		return nil, fmt.Errorf("bootstrap data has format %q, this agent runs only %q", f, "raw")
	}
	value := data[rawv1.ValueKey]
	if len(bytes.TrimSpace(value)) == 0 {
		return nil, errors.New("bootstrap data has no kubeadm configuration (key value)")
	}
	// Both documents are bounded as they expand before anything decodes
	// them (a document whose YAML does not parse is left to the decoder and
	// to kubeadm, which say so in their own words).
	for _, key := range []string{rawv1.ValueKey, rawv1.FilesKey} {
		var tooLarge *yamlsize.TooLargeError
		if err := yamlsize.Check(data[key], yamlsize.RawDocument); errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("bootstrap data key %s %w", key, err)
		}
	}
	p := &Plan{Config: value}
	if doc, ok := data[rawv1.FilesKey]; ok {
		var files rawv1.BootstrapFiles
		if err := yaml.UnmarshalStrict(doc, &files); err != nil {
			// The document holds keys: never echo it.
			return nil, errors.New("bootstrap data key files is not a BootstrapFiles document")
		}
		if files.APIVersion != rawv1.GroupVersion || files.Kind != rawv1.FilesKind {
			return nil, fmt.Errorf("bootstrap data key files is %s %s, want %s %s", files.APIVersion, files.Kind, rawv1.GroupVersion, rawv1.FilesKind)
		}
		for _, f := range files.Files {
			if !filepath.IsAbs(f.Path) || filepath.Clean(f.Path) != f.Path {
				return nil, fmt.Errorf("file path %q is not a clean absolute path", f.Path)
			}
		}
		for _, ph := range files.Placeholders {
			if ph.Text == "" || ph.Metadata == "" {
				return nil, errors.New("a placeholder of the BootstrapFiles document has no text or no metadata key")
			}
		}
		p.Action, p.Files, p.Placeholders = files.Action, files.Files, files.Placeholders
	}
	kinds := documentKinds(value)
	switch {
	case p.Action != "":
	case kinds["InitConfiguration"]:
		p.Action = rawv1.ActionInit
	case kinds["JoinConfiguration"]:
		p.Action = rawv1.ActionJoin
	default:
		return nil, errors.New("the kubeadm configuration has neither an InitConfiguration nor a JoinConfiguration")
	}
	switch p.Action {
	case rawv1.ActionInit:
		if !kinds["InitConfiguration"] && !kinds["ClusterConfiguration"] {
			return nil, errors.New("action init, but the configuration has no InitConfiguration or ClusterConfiguration")
		}
	case rawv1.ActionJoin, rawv1.ActionJoinControlPlane:
		if !kinds["JoinConfiguration"] {
			return nil, fmt.Errorf("action %s, but the configuration has no JoinConfiguration", p.Action)
		}
	default:
		return nil, fmt.Errorf("unknown action %q", p.Action)
	}
	return p, nil
}

// documentKinds returns the kinds of a YAML stream's documents.
func documentKinds(stream []byte) map[string]bool {
	kinds := map[string]bool{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if err != nil { // io.EOF, or a stream kubeadm will refuse with its own message
			return kinds
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if yaml.Unmarshal(doc, &meta) == nil && meta.Kind != "" {
			kinds[meta.Kind] = true
		}
	}
}

// Run writes the files, runs kubeadm and writes the success sentinel.
func (a *Agent) Run(ctx context.Context, data map[string][]byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	config, err := p.Fill(a.Metadata)
	if err != nil {
		return err
	}
	root, err := a.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range p.Files {
		if err := a.writeFile(root, f); err != nil {
			return err
		}
	}
	configPath := a.ConfigPath
	if configPath == "" {
		configPath = DefaultConfigPath
	}
	if err := write(root, configPath, config, 0o600, nil); err != nil {
		return fmt.Errorf("the kubeadm configuration %s: %w", configPath, err)
	}
	verb := "init"
	if p.Action != rawv1.ActionInit {
		verb = "join"
	}
	kubeadm := a.Kubeadm
	if kubeadm == "" {
		kubeadm = "kubeadm"
	}
	args := append([]string{verb, "--config", a.path(configPath)}, a.ExtraArgs...)
	cmd := exec.CommandContext(ctx, kubeadm, args...)
	cmd.Stdout, cmd.Stderr = a.Stdout, a.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubeadm %s: %w", verb, err)
	}
	if err := root.Remove(inRoot(configPath)); err != nil {
		return fmt.Errorf("removing the kubeadm configuration (it holds the bootstrap token): %w", err)
	}
	return write(root, rawv1.SuccessSentinel, []byte("success\n"), 0o644, nil)
}

func (a *Agent) path(p string) string {
	if a.onMachineRoot() {
		return p
	}
	return filepath.Join(a.Root, p)
}

// onMachineRoot reports whether the agent writes to the machine's own root
// ("" or "/"), where files get the owners the data names.
func (a *Agent) onMachineRoot() bool {
	return a.Root == "" || filepath.Clean(a.Root) == "/"
}

// fileTree is where the agent writes: names are relative to its top.
type fileTree interface {
	MkdirAll(name string, perm os.FileMode) error
	OpenFile(name string, flag int, perm os.FileMode) (*os.File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	Close() error
}

// machineRoot is the machine's own root: nothing can lead out of it, and
// its absolute symbolic links (/var/run on most distributions) are the
// system's, to be followed.
type machineRoot struct{}

func (machineRoot) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll("/"+name, perm) }
func (machineRoot) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile("/"+name, flag, perm)
}
func (machineRoot) Rename(oldname, newname string) error { return os.Rename("/"+oldname, "/"+newname) }
func (machineRoot) Remove(name string) error             { return os.Remove("/" + name) }
func (machineRoot) Close() error                         { return nil }

// openRoot opens the tree every write stays beneath: the machine's root, or
// Root through os.Root, where a path of the data or a symbolic link met on
// the way that would lead out of it fails.
func (a *Agent) openRoot() (fileTree, error) {
	if a.onMachineRoot() {
		return machineRoot{}, nil
	}
	root, err := os.OpenRoot(a.Root)
	if err != nil {
		return nil, fmt.Errorf("opening the root %s: %w", a.Root, err)
	}
	return root, nil
}

// inRoot is an absolute data path as a name beneath the root.
func inRoot(p string) string {
	return strings.TrimPrefix(filepath.Clean(p), "/")
}

// owner is a file's numeric owner.
type owner struct{ uid, gid int }

// write puts content at p beneath root with mode (special bits included)
// and owner: into a new private file in the same directory, given its owner
// and then its mode (a change of owner clears set-user-ID and set-group-ID
// bits), then renamed over p. So nobody reads the content under an older,
// looser mode, and a symbolic link where the file goes is replaced, never
// followed.
func write(root fileTree, p string, content []byte, mode os.FileMode, own *owner) error {
	name := inRoot(p)
	if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	var suffix [8]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".rawagent-"+hex.EncodeToString(suffix[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = fill(f, content, mode, own)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

func fill(f *os.File, content []byte, mode os.FileMode, own *owner) error {
	if _, err := f.Write(content); err != nil {
		return err
	}
	if own != nil {
		if err := f.Chown(own.uid, own.gid); err != nil {
			return err
		}
	}
	return f.Chmod(mode)
}

// fileMode turns a data file's octal permissions into a FileMode: Go keeps
// the set-user-ID, set-group-ID and sticky bits apart from the permission
// bits, so 0o4755 is ModeSetuid|0o755, not 0o4755.
func fileMode(permissions string) (os.FileMode, error) {
	if permissions == "" {
		return 0o644, nil
	}
	m, err := strconv.ParseUint(permissions, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("permissions %q are not octal", permissions)
	}
	mode := os.FileMode(m & 0o777)
	for _, special := range []struct {
		bit  uint64
		mode os.FileMode
	}{{0o4000, os.ModeSetuid}, {0o2000, os.ModeSetgid}, {0o1000, os.ModeSticky}} {
		if m&special.bit != 0 {
			mode |= special.mode
		}
	}
	return mode, nil
}

func (a *Agent) writeFile(root fileTree, f rawv1.File) error {
	mode, err := fileMode(f.Permissions)
	if err != nil {
		return fmt.Errorf("file %s: %w", f.Path, err)
	}
	var own *owner
	if f.Owner != "" && a.onMachineRoot() {
		// Owners name accounts of the real root; a test root has none.
		uid, gid, err := lookupOwner(f.Owner)
		if err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
		own = &owner{uid: uid, gid: gid}
	}
	if err := write(root, f.Path, []byte(f.Content), mode, own); err != nil {
		return fmt.Errorf("file %s: %w", f.Path, err)
	}
	return nil
}

func lookupOwner(owner string) (int, int, error) {
	name, group, _ := strings.Cut(owner, ":")
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("owner %q: %w", owner, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			return 0, 0, fmt.Errorf("owner %q: %w", owner, err)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	return uid, gid, nil
}
