package fieldrules

import (
	"fmt"
	"strings"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

// Markdown renders the table as docs/formats.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("<!-- Generated from internal/fieldrules by `make generate`; do not edit. -->\n")
	b.WriteString("# Fields by bootstrap format\n\n")
	b.WriteString("Which `KubeadmConfig` spec fields each `spec.format` honours. The admission webhooks (for\n")
	b.WriteString("`KubeadmConfigTemplate` at `spec.template.spec`) and `render --validate` apply this table; a\n")
	b.WriteString("field a format does not support is rejected with its field path, every problem at once.\n\n")
	b.WriteString("| field | what it does |")
	for _, f := range bootstrapv1.Formats {
		fmt.Fprintf(&b, " `%s` |", f)
	}
	b.WriteString("\n|---|---|")
	for range bootstrapv1.Formats {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range Rules {
		fmt.Fprintf(&b, "| `%s` | %s |", r.Field, r.Description)
		for _, f := range bootstrapv1.Formats {
			t := r.Treatment(f)
			if t.Note == "" {
				fmt.Fprintf(&b, " %s |", t.Verdict)
			} else {
				fmt.Fprintf(&b, " %s: %s |", t.Verdict, t.Note)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Rules beyond the table\n\n")
	fmt.Fprintf(&b, "- `format: %s` needs the `%s` feature gate (clusterctl variable `%s`).\n", bootstrapv1.Ignition, feature.KubeadmBootstrapFormatIgnition, feature.EnvVar(feature.KubeadmBootstrapFormatIgnition))
	fmt.Fprintf(&b, "- `format: %s` needs the `%s` feature gate (clusterctl variable `%s`).\n", bootstrapv1.Raw, feature.KubeadmBootstrapFormatRaw, feature.EnvVar(feature.KubeadmBootstrapFormatRaw))
	b.WriteString("- An empty `format` is defaulted to `cloud-config` by the mutating webhook.\n")
	b.WriteString("- `ignition.containerLinuxConfig` and `ignition.butane` are mutually exclusive. Either is translated at\n")
	b.WriteString("  admission (Butane with the Flatcar variant, version 1.1.0; a Container Linux Config through Ignition 2.3),\n")
	b.WriteString("  and one that does not translate, or warns under `strict`, is rejected with the translator's message,\n")
	b.WriteString("  less the document's values (line and column stay; quoted values become `(value redacted)`). Without\n")
	b.WriteString("  `strict`, what the translator warns about (a decimal file mode, say) comes back as admission warnings.\n")
	b.WriteString("- A Container Linux Config may only place files, directories and links on the root filesystem (Ignition 3\n")
	b.WriteString("  places them by path: the OEM partition is `/oem` on current Flatcar), and may not declare filesystems (swap,\n")
	b.WriteString("  data disks: use `diskSetup` and `mounts`, or Butane) or `networkd` units (write them as files under\n")
	b.WriteString("  `/etc/systemd/network`). Each is refused naming its field, instead of landing elsewhere.\n")
	b.WriteString("- Butane or a Container Linux Config merged on top of the bootstrap may extend it (drop-ins for\n")
	b.WriteString("  `kubeadm.service`, other files and units) but not undo it: files, directories or links at\n")
	b.WriteString("  `/etc/kubeadm.yml`, `/etc/kubeadm.sh`, `/etc/kubeadm.done`, under `/etc/kubernetes/pki` or `/run/cluster-api`,\n")
	b.WriteString("  and `kubeadm.service` replaced, disabled or masked are refused, naming the field and the path.\n")
	b.WriteString("- Upstream Cluster API's own checks hold for every format: `content` and `contentFrom` are exclusive,\n")
	b.WriteString("  file paths are unique, `passwd` and `passwdFrom` are exclusive, secret references name a secret and a\n")
	b.WriteString("  key, disk layouts add up to at most 100%, a discovery kubeconfig user has one of `authProvider` or `exec`.\n")
	b.WriteString("- On update, `format` cannot change once the bootstrap data secret exists.\n")
	b.WriteString("- A `files[].path` equal to `joinConfiguration.discovery.file.kubeConfigPath` is refused when the spec\n")
	b.WriteString("  carries `discovery.file.kubeConfig`: the provider writes that kubeconfig there, and two writers of one\n")
	b.WriteString("  path would leave whichever ran last.\n")
	b.WriteString("\n## What the Ignition output does that cloud-init would\n\n")
	b.WriteString("- `users[].sudo`: one `/etc/sudoers.d/` drop-in per user, named so that sudo reads it (sudo skips\n")
	b.WriteString("  names with `.` or ending in `~`, so `jane.doe` gets `jane_doe`; names stay unique).\n")
	b.WriteString("- `users[].passwd`: set only when `lockPassword` is `false`, because cloud-init locks passwords unless\n")
	b.WriteString("  told not to (`lock_passwd` defaults to true): both formats allow password logins for the same specs.\n")
	b.WriteString("- `ntp.enabled: false`: no time sync configuration at all, as cloud-init skips its ntp module; the\n")
	b.WriteString("  image's own time sync is left as it is.\n")
	b.WriteString("- `kubeadm.service` is ordered after `containerd.service`, `kubelet.service` is enabled (the image's\n")
	b.WriteString("  unit, not replaced), and `/etc/kubeadm.yml` (it holds the bootstrap token) is removed after kubeadm\n")
	b.WriteString("  succeeded, as upstream moves it away.\n")
	b.WriteString("- `mounts`: one mount unit per entry; a sixth field (fstab's fsck pass) other than 0 makes the mount wait\n")
	b.WriteString("  for `systemd-fsck@` of its block device, as systemd's fstab generator does.\n")
	return b.String()
}
