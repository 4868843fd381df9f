// Package validators runs the real consumers' own validators over rendered
// bootstrap data: Debian's cloud-init schema check, Ignition's validator and
// kubeadm's `config validate`. Binaries come from internal/testbin.
package validators

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

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
