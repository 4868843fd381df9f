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
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/pkg/rawagent"
)

// consumer runs bootstrap data the way the format's consumer does on a real machine.
type consumer interface {
	name() string
	run(ctx context.Context, m *machine) error
}

// consumers is the one map of each format to what runs its data on a host;
// data without a format key is cloud-config, as Cluster API's contract says.
var consumers = map[bootstrapv1.Format]consumer{
	bootstrapv1.CloudConfig: cloudInit{},
	bootstrapv1.Ignition:    ignition{},
	bootstrapv1.Raw:         rawAgent{},
}

func consumerFor(format string) (consumer, error) {
	if format == "" {
		format = string(bootstrapv1.CloudConfig)
	}
	c, ok := consumers[bootstrapv1.Format(format)]
	if !ok {
		return nil, fmt.Errorf("no consumer for bootstrap format %q", format)
	}
	return c, nil
}

// ConsumerName is the name a host reports (its status's consumer) once it
// ran data of format; "" for a format no consumer runs.
func ConsumerName(format bootstrapv1.Format) string {
	if c, ok := consumers[format]; ok {
		return c.name()
	}
	return ""
}

// cloudInit is Debian's cloud-init with a NoCloud seed: its own init, config
// and final stages, limited to the modules that are safe inside a host that
// shares this machine's kernel (no disks, no packages, no time sync).
type cloudInit struct{}

func (cloudInit) name() string { return "cloud-init" }

// cloudInitModules is the drop-in that picks the seed and the modules.
const cloudInitModules = `datasource_list: [NoCloud]
network: {config: disabled}
cloud_init_modules: [bootcmd, write-files, set_hostname, update_hostname, update_etc_hosts, users-groups]
cloud_config_modules: [runcmd]
cloud_final_modules: [scripts-user]
`

func (cloudInit) run(ctx context.Context, m *machine) error {
	seed := "/var/lib/cloud/seed/nocloud"
	files := map[string][]byte{
		filepath.Join(seed, "user-data"):               m.cfg.Data["value"],
		filepath.Join(seed, "meta-data"):               noCloudMetaData(m.metadata()),
		"/etc/cloud/cloud.cfg.d/99-simulated-host.cfg": []byte(cloudInitModules),
	}
	for p, c := range files {
		if err := writeFile(p, c, 0o600); err != nil {
			return err
		}
	}
	defer m.keepLogs("cloud-init-output.log", "/var/log/cloud-init-output.log")
	defer m.keepLogs("cloud-init.log", "/var/log/cloud-init.log")
	for _, stage := range [][]string{{"init"}, {"modules", "--mode", "config"}, {"modules", "--mode", "final"}} {
		if err := m.runLogged(ctx, "cloud-init", stage...); err != nil {
			return fmt.Errorf("cloud-init %s: %w (see cloud-init-output.log)", strings.Join(stage, " "), err)
		}
	}
	return nil
}

// ignition is Ignition's own binary: fetch-offline and files stages against
// this host's root, then what systemd would do at boot with the units it
// enabled.
type ignition struct{}

func (ignition) name() string { return "ignition" }

func (ignition) run(ctx context.Context, m *machine) error {
	dir := "/run/simulated-host/ignition"
	config := filepath.Join(dir, "user.ign")
	if err := writeFile(config, m.cfg.Data["value"], 0o600); err != nil {
		return err
	}
	// What Flatcar's coreos-metadata.service (Afterburn) writes on OpenStack.
	if err := writeFile(bootstrapv1.IgnitionMetadataEnvFile, afterburnAttributes(m.metadata()), 0o644); err != nil {
		return err
	}
	common := []string{"-platform", "file", "-root", "/", "-log-to-stdout",
		"-config-cache", filepath.Join(dir, "config.json"), "-state-file", filepath.Join(dir, "state.json"), "-neednet", filepath.Join(dir, "neednet")}
	for _, stage := range []string{"fetch-offline", "files"} {
		cmd := exec.CommandContext(ctx, filepath.Join(imageBinDir, "ignition"), append([]string{"-stage", stage}, common...)...)
		cmd.Env = append(os.Environ(), "IGNITION_CONFIG_FILE="+config)
		cmd.Stdout, cmd.Stderr = m.out, m.out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("ignition -stage %s: %w", stage, err)
		}
	}
	return runEnabledUnits(ctx, m)
}

// runEnabledUnits does what the boot after Ignition does with the units it
// enabled (its preset file): starts each service through the host's service
// manager and waits for the oneshot ones (kubeadm.service) to finish. Mount
// units are reported and skipped: hosts have no disks of their own.
func runEnabledUnits(ctx context.Context, m *machine) error {
	names, err := m.services.EnablePresets("/etc/systemd/system-preset/20-ignition.preset")
	if err != nil {
		return fmt.Errorf("ignition enabled no units: %w", err)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".service") {
			m.log.Printf("unit %s: not started (only services run on a simulated host)", name)
			continue
		}
		if _, err := m.services.Start(name); err != nil {
			return fmt.Errorf("unit %s: %w", name, err)
		}
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".service") {
			continue
		}
		if err := m.services.Result(ctx, name); err != nil {
			return fmt.Errorf("unit %s: %w (see %s)", name, err, strings.TrimSuffix(name, ".service")+".log")
		}
	}
	return nil
}

// metadata is what the host's infrastructure knows about it, handed to each
// consumer the way its platform would: NoCloud meta-data for cloud-init,
// Afterburn's attributes for Ignition, the agent's own metadata for raw.
func (m *machine) metadata() map[rawv1.MetadataKey]string {
	return map[rawv1.MetadataKey]string{
		rawv1.MetadataLocalHostname: m.cfg.Name,
		rawv1.MetadataInstanceID:    m.cfg.InstanceID,
		rawv1.MetadataLocalIPv4:     netip.MustParsePrefix(m.cfg.Address).Addr().String(),
	}
}

func noCloudMetaData(md map[rawv1.MetadataKey]string) []byte {
	var b []byte
	for _, k := range rawv1.MetadataKeys {
		b = fmt.Appendf(b, "%s: %s\n", k, md[k])
	}
	return b
}

func afterburnAttributes(md map[rawv1.MetadataKey]string) []byte {
	return fmt.Appendf(nil, "COREOS_OPENSTACK_HOSTNAME=%s\nCOREOS_OPENSTACK_INSTANCE_ID=%s\nCOREOS_OPENSTACK_IPV4_LOCAL=%s\n",
		md[rawv1.MetadataLocalHostname], md[rawv1.MetadataInstanceID], md[rawv1.MetadataLocalIPv4])
}

// rawAgent is this project's public raw agent, used as a provider would.
type rawAgent struct{}

func (rawAgent) name() string { return "raw agent (pkg/rawagent)" }

func (rawAgent) run(ctx context.Context, m *machine) error {
	a := &rawagent.Agent{Stdout: m.out, Stderr: m.out, Metadata: m.metadata()}
	return a.Run(ctx, m.cfg.Data)
}

func (m *machine) runLogged(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = m.out, m.out
	return cmd.Run()
}

// keepLogs copies a log of the host into the Lab's log directory.
func (m *machine) keepLogs(name, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if f, err := m.logFile(name); err == nil {
		_, _ = f.Write(b)
		f.Close()
	}
}

func writeFile(path string, content []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, content, mode)
}
