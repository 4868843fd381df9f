// Package validators runs the real consumers' own validators over rendered
// bootstrap data: Debian's cloud-init schema check, Ignition's validator and
// kubeadm's `config validate`. Binaries come from internal/testbin.
package validators

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vincent-petithory/dataurl"
	"sigs.k8s.io/yaml"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

func runOn(tool string, data []byte, args func(file string) []string) (string, error) {
	bin, err := testbin.Path(tool)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "validate-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "input")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, args(file)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// jinjaHeader is the first line of this provider's cloud-config. Debian
// bookworm's cloud-init (22.4) schema command only reads files that start with
// #cloud-config; cloud-init itself renders the jinja line away before it
// parses user data, so the check runs on the document below it, unchanged.
const jinjaHeader = "## template: jinja\n"

// CloudInit checks user data with `cloud-init schema --config-file`.
func CloudInit(userData []byte) error {
	doc := bytes.TrimPrefix(userData, []byte(jinjaHeader))
	if !bytes.HasPrefix(doc, []byte("#cloud-config\n")) {
		return fmt.Errorf("user data does not start with #cloud-config")
	}
	out, err := runOn(testbin.CloudInit, doc, func(f string) []string { return []string{"schema", "--config-file", f} })
	if err != nil || !strings.Contains(out, "Valid cloud-config") {
		return fmt.Errorf("cloud-init schema rejects the user data (%v):\n%s", err, out)
	}
	return nil
}

// Ignition checks a config with Ignition's validator; any report is an error.
func Ignition(config []byte) error {
	out, err := runOn(testbin.IgnitionValidate, config, func(f string) []string { return []string{f} })
	if err != nil || strings.TrimSpace(out) != "" {
		return fmt.Errorf("ignition-validate reports problems (%v):\n%s", err, out)
	}
	return nil
}

// Kubeadm checks a kubeadm configuration stream with `kubeadm config validate`.
func Kubeadm(config []byte) error {
	out, err := runOn(testbin.Kubeadm, config, func(f string) []string { return []string{"config", "validate", "--config", f} })
	if err != nil {
		return fmt.Errorf("kubeadm config validate rejects the configuration (%v):\n%s", err, out)
	}
	return nil
}

// KubeadmConfigIn finds the kubeadm configuration that bootstrap data of a
// format delivers: the raw value itself, or the file the cloud-config or
// Ignition config writes whose content holds kubeadm.k8s.io documents. It
// returns the file's path on the machine ("" for raw).
func KubeadmConfigIn(format string, value []byte) (string, []byte, error) {
	type file struct {
		path    string
		content []byte
	}
	var files []file
	switch format {
	case "raw":
		return "", value, nil
	case "cloud-config":
		var c struct {
			WriteFiles []struct{ Path, Content string } `json:"write_files"`
		}
		if err := yaml.Unmarshal(bytes.TrimPrefix(value, []byte(jinjaHeader)), &c); err != nil {
			return "", nil, fmt.Errorf("cloud-config does not parse: %w", err)
		}
		for _, f := range c.WriteFiles {
			files = append(files, file{f.Path, []byte(f.Content)})
		}
	case "ignition":
		var c struct {
			Storage struct {
				Files []struct {
					Path     string
					Contents struct{ Source string }
				}
			}
		}
		if err := json.Unmarshal(value, &c); err != nil {
			return "", nil, fmt.Errorf("ignition config does not parse: %w", err)
		}
		for _, f := range c.Storage.Files {
			u, err := dataurl.DecodeString(f.Contents.Source)
			if err != nil {
				continue // not a data URL: not written by the bootstrap
			}
			files = append(files, file{f.Path, u.Data})
		}
	default:
		return "", nil, fmt.Errorf("unknown format %q", format)
	}
	for _, f := range files {
		if bytes.Contains(f.content, []byte("apiVersion: kubeadm.k8s.io/")) {
			return f.path, f.content, nil
		}
	}
	return "", nil, fmt.Errorf("the %s data writes no kubeadm configuration", format)
}

// BootstrapData checks a data secret's value with its format's own consumer
// (cloud-init's schema, Ignition's validator) and the kubeadm configuration
// it delivers with kubeadm.
func BootstrapData(format string, value []byte) error {
	switch format {
	case "cloud-config":
		if err := CloudInit(value); err != nil {
			return err
		}
	case "ignition":
		if err := Ignition(value); err != nil {
			return err
		}
	}
	_, config, err := KubeadmConfigIn(format, value)
	if err != nil {
		return err
	}
	return Kubeadm(config)
}

// CloudInitLoad parses YAML with cloud-init's own loader (util.load_yaml, on
// the Python cloud-init runs with) and returns what it read, as JSON values.
// This is what a machine would make of user data, as opposed to what a YAML
// 1.2 library thinks it says.
func CloudInitLoad(doc []byte) (any, error) {
	out, err := CloudInitLoadAll([][]byte{doc})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// CloudInitLoadAll is CloudInitLoad for many documents in one Python process.
func CloudInitLoadAll(docs [][]byte) ([]any, error) {
	bin, err := testbin.Path(testbin.CloudInit)
	if err != nil {
		return nil, err
	}
	python, err := interpreterOf(bin)
	if err != nil {
		return nil, err
	}
	const loader = `import sys, json
from cloudinit import util
out = []
for i, doc in enumerate(json.load(sys.stdin)):
    data = util.load_yaml(doc, default=None, allowed=(dict, list))
    if data is None:
        sys.exit("cloud-init's loader rejected document %d" % i)
    out.append(data)
json.dump(out, sys.stdout)
`
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = string(d)
	}
	in, err := json.Marshal(texts)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(python, "-c", loader)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("cloud-init's YAML loader: %v: %s", err, stderr.String())
	}
	var out []any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, err
	}
	if len(out) != len(docs) {
		return nil, fmt.Errorf("cloud-init's loader returned %d documents for %d", len(out), len(docs))
	}
	return out, nil
}

// interpreterOf reads the #! line of a script.
func interpreterOf(script string) (string, error) {
	data, err := os.ReadFile(script)
	if err != nil {
		return "", err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("#!")) {
		return "", fmt.Errorf("%s is not a script", script)
	}
	fields := strings.Fields(string(line[2:]))
	if len(fields) == 0 {
		return "", fmt.Errorf("%s has an empty #! line", script)
	}
	return fields[0], nil
}
