package host

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/ignitionguard"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/pkg/rawagent"
)

// consumer runs bootstrap data the way the format's consumer does on a real machine.
type consumer interface {
	name() string
	run(ctx context.Context, m *machine) error
}

func consumerFor(format string) (consumer, error) {
	switch format {
	case "cloud-config", "":
		return cloudInit{}, nil
	case "ignition":
		return ignition{}, nil
	case "raw":
		return rawAgent{}, nil
	}
	return nil, fmt.Errorf("no consumer for bootstrap format %q", format)
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
	if err := writeFile(ignitionguard.MetadataEnvFile, afterburnAttributes(m.metadata()), 0o644); err != nil {
		return err
	}
	common := []string{"-platform", "file", "-root", "/", "-log-to-stdout",
		"-config-cache", filepath.Join(dir, "config.json"), "-state-file", filepath.Join(dir, "state.json"), "-neednet", filepath.Join(dir, "neednet")}
	for _, stage := range []string{"fetch-offline", "files"} {
		cmd := exec.CommandContext(ctx, "ignition", append([]string{"-stage", stage}, common...)...)
		cmd.Env = append(os.Environ(), "IGNITION_CONFIG_FILE="+config)
		cmd.Stdout, cmd.Stderr = m.out, m.out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("ignition -stage %s: %w", stage, err)
		}
	}
	return runEnabledUnits(ctx, m)
}

// runEnabledUnits starts the services Ignition enabled, in preset order, the
// way systemd would at boot: conditions, environment and ExecStart* lines.
// Mount units are reported and skipped: hosts have no disks of their own.
func runEnabledUnits(ctx context.Context, m *machine) error {
	presets, err := os.ReadFile("/etc/systemd/system-preset/20-ignition.preset")
	if err != nil {
		return fmt.Errorf("ignition enabled no units: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(presets)))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || fields[0] != "enable" {
			continue
		}
		name := fields[1]
		if !strings.HasSuffix(name, ".service") {
			m.log.Printf("unit %s: not started (only services run on a simulated host)", name)
			continue
		}
		if _, err := os.Stat(filepath.Join("/etc/systemd/system", name)); err != nil {
			// An image's own unit (kubelet.service): the simulated kubelet stands in.
			m.log.Printf("unit %s: enabled, but this host has no such unit", name)
			continue
		}
		if err := runService(ctx, m, name); err != nil {
			return fmt.Errorf("unit %s: %w", name, err)
		}
	}
	return nil
}

func runService(ctx context.Context, m *machine, name string) error {
	paths := []string{filepath.Join("/etc/systemd/system", name)}
	dropIns, _ := filepath.Glob(filepath.Join("/etc/systemd/system", name+".d", "*.conf"))
	paths = append(paths, dropIns...)
	var opts []*unit.UnitOption
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		o, err := unit.Deserialize(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		opts = append(opts, o...)
	}
	env := os.Environ()
	var execs [3][]string // ExecStartPre, ExecStart, ExecStartPost
	for _, o := range opts {
		switch {
		case o.Section == "Unit" && o.Name == "ConditionPathExists":
			path, negate := strings.CutPrefix(o.Value, "!")
			_, statErr := os.Stat(path)
			if (statErr == nil) == negate {
				m.log.Printf("unit %s: condition %s=%s not met, not started", name, o.Name, o.Value)
				return nil
			}
		case o.Section == "Service" && o.Name == "Environment":
			env = append(env, strings.Fields(strings.Trim(o.Value, `"`))...)
		case o.Section == "Service" && o.Name == "EnvironmentFile":
			path, optional := strings.CutPrefix(o.Value, "-")
			b, err := os.ReadFile(path)
			if err != nil && !optional {
				return err
			}
			for _, line := range strings.Split(string(b), "\n") {
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					env = append(env, line)
				}
			}
		case o.Section == "Service" && o.Name == "ExecStartPre":
			execs[0] = append(execs[0], o.Value)
		case o.Section == "Service" && o.Name == "ExecStart":
			if o.Value == "" { // a drop-in resets the list
				execs[1] = nil
				continue
			}
			execs[1] = append(execs[1], o.Value)
		case o.Section == "Service" && o.Name == "ExecStartPost":
			execs[2] = append(execs[2], o.Value)
		}
	}
	m.log.Printf("unit %s: starting", name)
	for _, group := range execs {
		for _, line := range group {
			ignoreFailure := strings.HasPrefix(line, "-")
			argv := strings.Fields(strings.TrimLeft(line, "-@+!:"))
			if len(argv) == 0 {
				continue
			}
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Env = env
			cmd.Stdout, cmd.Stderr = m.out, m.out
			if err := cmd.Run(); err != nil && !ignoreFailure {
				return fmt.Errorf("%s: %w", argv[0], err)
			}
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
		rawv1.MetadataInstanceID:    "simulated-" + m.cfg.Name,
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
