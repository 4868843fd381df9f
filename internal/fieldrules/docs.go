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

package fieldrules

import (
	"fmt"
	"strings"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/placeholders"
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
	b.WriteString("  less the document's values (line and column stay, as the document is written, also when it leaves out\n")
	b.WriteString("  `variant` and `version`; quoted values become `(value redacted)`). Without\n")
	b.WriteString("  `strict`, what the translator warns about (a decimal file mode, say) comes back as admission warnings.\n")
	b.WriteString("- A Container Linux Config may only place files, directories and links on the root filesystem (Ignition 3\n")
	b.WriteString("  places them by path: the OEM partition is `/oem` on current Flatcar), and may not declare filesystems (swap,\n")
	b.WriteString("  data disks: use `diskSetup` and `mounts`, or Butane) or `networkd` units (write them as files under\n")
	b.WriteString("  `/etc/systemd/network`). Each is refused naming its field, instead of landing elsewhere. What Ignition 2\n")
	b.WriteString("  only warned about but Ignition 3 refuses (a partition label with `:`, which was truncated) is refused with\n")
	b.WriteString("  Ignition's reason.\n")
	b.WriteString("- Butane or a Container Linux Config merged on top of the bootstrap may extend it (drop-ins for\n")
	b.WriteString("  `kubeadm.service`, other files and units) but not undo it: files, directories or links at\n")
	b.WriteString("  `/etc/kubeadm.yml`, `/etc/kubeadm.sh`, `/etc/kubeadm.done`, under `/etc/kubernetes/pki` or `/run/cluster-api`,\n")
	b.WriteString("  and `kubeadm.service` replaced, disabled or masked are refused, naming the field and the path.\n")
	b.WriteString("- A file or link of Butane or a Container Linux Config at the path of a `files[]` entry replaces that\n")
	b.WriteString("  entry on the machine (Ignition merges the extra configuration last); admission warns, naming both.\n")
	b.WriteString("- What the machine would fail on is refused at admission by the checks the renderers make\n")
	b.WriteString("  (`internal/machinechecks`), at its field: inline `content` that does not decode under its `encoding`\n")
	b.WriteString("  (cloud-init stops writing files at the first that does not), `permissions` that are not an octal mode\n")
	b.WriteString("  up to 7777; under cloud-config, a `diskSetup.partitions[].device` given twice; under Ignition, devices\n")
	b.WriteString("  and mounts as Ignition and systemd read them: cloud-init's device aliases (`ephemeral0`, `swap`) are\n")
	b.WriteString("  refused (nothing resolves them without cloud-init), a bare kernel name (`xvdb`) means `/dev/xvdb` as for\n")
	b.WriteString("  cloud-init, `LABEL=`/`UUID=`/`PARTLABEL=`/`PARTUUID=` their `/dev/disk` links; a device or mount point\n")
	b.WriteString("  given twice, a mount without a mount point or with a relative one, a fsck pass that is not a number\n")
	b.WriteString("  are refused. Inline content comes to at most 1 MiB in all, as written and as decoded (a data secret\n")
	b.WriteString("  holds no more). Content from a Secret or a template is checked when it is rendered (`RenderFailed`,\n")
	b.WriteString("  `ContentTooLarge`).\n")
	b.WriteString("- Upstream Cluster API's own checks hold for every format: `content` and `contentFrom` are exclusive,\n")
	b.WriteString("  file paths are unique, `passwd` and `passwdFrom` are exclusive, secret references name a secret and a\n")
	b.WriteString("  key, disk layouts add up to at most 100%, a discovery kubeconfig user has one of `authProvider` or `exec`.\n")
	b.WriteString("- On update, `format` cannot change once the bootstrap data secret exists, except in a MachinePool's\n")
	b.WriteString("  config: its data secret is rendered again for the pool's next instances.\n")
	b.WriteString("- A `files[].path` equal to `joinConfiguration.discovery.file.kubeConfigPath` is refused when the spec\n")
	b.WriteString("  carries `discovery.file.kubeConfig`: the provider writes that kubeconfig there, and two writers of one\n")
	b.WriteString("  path would leave whichever ran last.\n")
	b.WriteString(placeholderSection())
	b.WriteString("\n## Size limits and compression\n\n")
	b.WriteString("`gzipUserData: true` (beyond upstream) delivers the data gzip-compressed in the form each consumer\n")
	b.WriteString("undoes by itself: for `cloud-config` the whole user data is gzipped (cloud-init recognises gzip and\n")
	b.WriteString("decompresses before reading the jinja and `#cloud-config` lines); for `ignition` the data is a small\n")
	b.WriteString("Ignition config whose `ignition.config.replace` is the full config as a gzip-compressed data URL\n")
	b.WriteString("(`compression: gzip`), which Ignition fetches and decompresses before it does anything. Measured sizes\n")
	b.WriteString("and the common limits are in [sizes.md](sizes.md); `render --size-report` measures any config.\n")
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

// placeholderSection documents the {{ ds.meta_data.* }} contract per format.
func placeholderSection() string {
	var b strings.Builder
	b.WriteString("\n## Placeholders: `{{ ds.meta_data.* }}`\n\n")
	b.WriteString("Templates often name nodes and set kubelet arguments with cloud-init's instance data, e.g.\n")
	b.WriteString("`nodeRegistration.name: '{{ ds.meta_data.local_hostname }}'`. What each format does with them:\n\n")
	b.WriteString("- `cloud-config`: the output starts with `## template: jinja`, so cloud-init renders Jinja on the machine,\n")
	b.WriteString("  anywhere in the user data (as upstream), where a user can mean Jinja: expressions that read cloud-init's\n")
	b.WriteString("  instance data (`ds`, `v1`, `v2` and the v1 names such as `local_hostname`, with filters and methods),\n")
	b.WriteString("  quoted-string expressions (`{{ '{{' }}`) and `{% raw %}` blocks. Every other `{{`, `{%` and `{#` (a Helm or\n")
	b.WriteString("  Go template in a file, bash's `${#array[@]}`, an unknown name) is escaped so that it reaches the machine\n")
	b.WriteString("  as written; upstream's output there makes cloud-init drop the whole user data (a Jinja syntax error) or\n")
	b.WriteString("  write `CI_MISSING_JINJA_VAR/name`. A spec that uses Jinja statements (`{% if %}`, `{% for %}`, ...) gets no\n")
	b.WriteString("  escaping: it is rendered exactly as upstream's would be.\n")
	b.WriteString("- `ignition` and `raw` have no Jinja. In kubeadm configuration (`clusterConfiguration`,\n")
	b.WriteString("  `initConfiguration`, `joinConfiguration`) they fill the placeholders below; any other Jinja there (other\n")
	b.WriteString("  keys, filters, method calls such as `.split(\".\")`, statements) is refused at admission, naming the field,\n")
	b.WriteString("  because kubeadm would read it verbatim.\n\n")
	b.WriteString("| metadata | spellings (quotes, `[\"x\"]` and `-`/`_` as cloud-init allows) | `ignition`: Afterburn attribute names tried, in order |\n|---|---|---|\n")
	for _, k := range rawv1.MetadataKeys {
		var spell []string
		for _, s := range placeholders.Spellings[k] {
			spell = append(spell, "`{{ "+s+" }}`")
		}
		attrs := placeholders.AfterburnAttributes[k]
		last := ""
		if k == rawv1.MetadataLocalHostname {
			last = ", then the machine's `hostname`"
		}
		var names []string
		for _, a := range attrs {
			if n, ok := strings.CutPrefix(a, "COREOS_"); ok {
				names = append(names, n)
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s, each as `COREOS_<name>` (Flatcar), then as `AFTERBURN_<name>`%s |\n",
			k, strings.Join(spell, ", "), strings.Join(names, ", "), last)
	}
	b.WriteString("\n- `ignition`: when the kubeadm configuration has placeholders, `kubeadm.service` wants and runs after\n")
	fmt.Fprintf(&b, "  `coreos-metadata.service` (Afterburn) and loads `%s` (and `/run/metadata/coreos`, where older\n", bootstrapv1.IgnitionMetadataEnvFile)
	b.WriteString("  templates' own units write `COREOS_CUSTOM_*`) as its environment; `/etc/kubeadm.sh` fills the placeholders\n")
	b.WriteString("  before any `preKubeadmCommands`, as cloud-init renders before anything runs. `COREOS_CUSTOM_*` (what a\n")
	b.WriteString("  provider writes itself) comes first. A key no attribute carries stops the bootstrap with a message naming\n")
	b.WriteString("  it; a value other than letters, digits and `._:-` too (it would change the YAML around it). Outside kubeadm\n")
	b.WriteString("  configuration (files, commands, users, mounts, disks, ntp) Ignition writes text verbatim, so cloud-init's\n")
	fmt.Fprintf(&b, "  instance data there is refused; commands can read `%s` themselves.\n", bootstrapv1.IgnitionMetadataEnvFile)
	b.WriteString("- `raw`: the `BootstrapFiles` document lists each placeholder's exact text and metadata key under\n")
	b.WriteString("  `placeholders`; the agent replaces them in `value` before kubeadm runs (`pkg/rawagent`: `Agent.Metadata`;\n")
	b.WriteString("  see [raw-format.md](raw-format.md)).\n")
	return b.String()
}
