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

// Package consumers runs the real consumers of bootstrap data over what the
// renderers produce, for tests: Debian's cloud-init (its schema check, its
// YAML loader and Jinja rendering), Ignition's validator and fetch stage, and
// kubeadm's `config validate`. Binaries come from internal/testbin.
package consumers

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
	return runBinaryOn(bin, data, args)
}

func runBinaryOn(bin string, data []byte, args func(file string) []string) (string, error) {
	var out bytes.Buffer
	err := withFiles(map[string][]byte{"input": data}, func(dir string) error {
		cmd := exec.Command(bin, args(filepath.Join(dir, "input"))...)
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd.Run()
	})
	return out.String(), err
}

// withFiles writes files into a fresh temporary directory for fn, and
// removes it afterwards.
func withFiles(files map[string][]byte, fn func(dir string) error) error {
	dir, err := os.MkdirTemp("", "validate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return fn(dir)
}

// cloudInitPython runs a Python program with the interpreter cloud-init runs
// on (so its modules import as on a machine), stdin as its input.
func cloudInitPython(program string, stdin []byte) ([]byte, error) {
	bin, err := testbin.Path(testbin.CloudInit)
	if err != nil {
		return nil, err
	}
	python, err := interpreterOf(bin)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(python, "-c", program)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return stdout.Bytes(), nil
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
	bin, err := testbin.Path(testbin.Kubeadm)
	if err != nil {
		return err
	}
	return kubeadmValidate(bin, testbin.Versions["KUBERNETES_VERSION"], config)
}

// KubeadmOf checks a kubeadm configuration stream with the kubeadm of a
// Kubernetes version (one of testbin.MatrixVersions).
func KubeadmOf(version string, config []byte) error {
	bin, err := testbin.KubeadmOf(version)
	if err != nil {
		return err
	}
	return kubeadmValidate(bin, version, config)
}

func kubeadmValidate(bin, version string, config []byte) error {
	out, err := runBinaryOn(bin, config, func(f string) []string { return []string{"config", "validate", "--config", f} })
	if err != nil {
		return fmt.Errorf("kubeadm %s config validate rejects the configuration (%v):\n%s", version, err, out)
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
		dataFiles, err := ignitionDataFiles(value)
		if err != nil {
			return "", nil, err
		}
		for _, f := range dataFiles {
			files = append(files, file(f))
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

type ignitionFile struct {
	path    string
	content []byte
}

// ignitionDataFiles returns the files an Ignition config writes from data
// URLs (every file the bootstrap writes), in order.
func ignitionDataFiles(config []byte) ([]ignitionFile, error) {
	var c struct {
		Storage struct {
			Files []struct {
				Path     string
				Contents struct{ Source string }
			}
		}
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("ignition config does not parse: %w", err)
	}
	var out []ignitionFile
	for _, f := range c.Storage.Files {
		u, err := dataurl.DecodeString(f.Contents.Source)
		if err != nil {
			continue // not a data URL: not written by the bootstrap
		}
		out = append(out, ignitionFile{f.Path, u.Data})
	}
	return out, nil
}

// IgnitionFile returns the content an Ignition config writes at path.
func IgnitionFile(config []byte, path string) ([]byte, error) {
	files, err := ignitionDataFiles(config)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.path == path {
			return f.content, nil
		}
	}
	return nil, fmt.Errorf("the ignition config writes no %s", path)
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
// 1.2 library thinks it says. A document that starts with cloud-init's jinja
// line is first rendered by cloud-init's own Jinja handler, with
// SampleMetaData as the instance data, as on a machine.
func CloudInitLoad(doc []byte) (any, error) {
	out, err := CloudInitLoadAll([][]byte{doc})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// SampleMetaData is the datasource meta-data CloudInitLoad renders with.
var SampleMetaData = map[string]string{"local-hostname": "node-7", "instance-id": "i-0123abcd", "local-ipv4": "10.20.30.7"}

// CloudInitLoadAll is CloudInitLoad for many documents in one Python process.
func CloudInitLoadAll(docs [][]byte) ([]any, error) {
	const loader = `import sys, json
from cloudinit import util
from cloudinit.handlers.jinja_template import render_jinja_payload
request = json.load(sys.stdin)
out = []
for i, doc in enumerate(request["docs"]):
    if doc.startswith("## template: jinja"):
        doc = render_jinja_payload(doc, "user-data", request["instance"])
        if doc is None:
            sys.exit("cloud-init's Jinja handler ignores document %d" % i)
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
	in, err := json.Marshal(map[string]any{"docs": texts, "instance": instanceData(SampleMetaData)})
	if err != nil {
		return nil, err
	}
	stdout, err := cloudInitPython(loader, in)
	if err != nil {
		return nil, fmt.Errorf("cloud-init's YAML loader: %w", err)
	}
	var out []any
	if err := json.Unmarshal(stdout, &out); err != nil {
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

// CloudInitRender renders Jinja user data the way cloud-init does on a machine
// (`cloud-init devel render`), with instance data that holds the given
// meta-data (keys as a datasource names them, e.g. local-hostname).
func CloudInitRender(userData []byte, metaData map[string]string) ([]byte, error) {
	instance, err := json.Marshal(instanceData(metaData))
	if err != nil {
		return nil, err
	}
	bin, err := testbin.Path(testbin.CloudInit)
	if err != nil {
		return nil, err
	}
	// Only stdout is the rendered data: cloud-init warns on stderr, for
	// instance of a variable the meta-data lacks (which it renders as
	// CI_MISSING_JINJA_VAR, as on a machine).
	var out, stderr bytes.Buffer
	err = withFiles(map[string][]byte{"user-data": userData, "instance-data.json": instance}, func(dir string) error {
		cmd := exec.Command(bin, "devel", "render", "-i", filepath.Join(dir, "instance-data.json"), filepath.Join(dir, "user-data"))
		cmd.Stdout, cmd.Stderr = &out, &stderr
		return cmd.Run()
	})
	if err != nil {
		return nil, fmt.Errorf("cloud-init devel render: %v: %s", err, stderr.Bytes())
	}
	return out.Bytes(), nil
}

// instanceData is cloud-init's instance data for a datasource's meta-data:
// the standardised v1 keys, in both spellings its own instance-data.json
// carries, beside the meta-data itself.
func instanceData(metaData map[string]string) map[string]any {
	v1 := map[string]string{}
	for _, k := range []string{"local-hostname", "instance-id"} {
		v1[k] = metaData[k]
		v1[strings.ReplaceAll(k, "-", "_")] = metaData[k]
	}
	return map[string]any{"v1": v1, "ds": map[string]any{"meta_data": metaData}}
}

// UserDataPart is one part of user data as cloud-init classified it.
type UserDataPart struct {
	Type    string `json:"type"`
	Payload []byte `json:"payload"`
}

// CloudInitUserData is what cloud-init's own user-data processor makes of
// blob on a machine: each part's content type and payload, after cloud-init
// undid any compression.
func CloudInitUserData(blob []byte) ([]UserDataPart, error) {
	const processor = `import sys, json, base64
from cloudinit import user_data
msg = user_data.UserDataProcessor({}).process(sys.stdin.buffer.read())
out = []
for part in msg.walk():
    if part.get_content_maintype() == "multipart":
        continue
    out.append({"type": part.get_content_type(), "payload": base64.b64encode(part.get_payload(decode=True)).decode()})
json.dump(out, sys.stdout)
`
	stdout, err := cloudInitPython(processor, blob)
	if err != nil {
		return nil, fmt.Errorf("cloud-init's user-data processor: %w", err)
	}
	var parts []UserDataPart
	return parts, json.Unmarshal(stdout, &parts)
}

// IgnitionFetched runs Ignition's own fetch-offline stage on config and
// returns the config Ignition goes on to apply (its config cache): replaced
// and merged configs fetched, decompressed and parsed, as on a machine.
func IgnitionFetched(config []byte) ([]byte, error) {
	bin, err := testbin.Path(testbin.Ignition)
	if err != nil {
		return nil, err
	}
	var cache []byte
	err = withFiles(map[string][]byte{"user.ign": config}, func(dir string) error {
		cmd := exec.Command(bin, "-stage", "fetch-offline", "-platform", "file", "-root", filepath.Join(dir, "root"), "-log-to-stdout",
			"-config-cache", filepath.Join(dir, "cache.json"), "-state-file", filepath.Join(dir, "state.json"), "-neednet", filepath.Join(dir, "neednet"))
		cmd.Env = append(os.Environ(), "IGNITION_CONFIG_FILE="+filepath.Join(dir, "user.ign"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("ignition -stage fetch-offline: %v: %s", err, out)
		}
		cache, err = os.ReadFile(filepath.Join(dir, "cache.json"))
		return err
	})
	return cache, err
}
