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

// Package placeholders finds cloud-init's instance-data placeholders
// ({{ ds.meta_data.local_hostname }} and its other spellings) in a
// KubeadmConfig spec and says which machine metadata each stands for.
//
// The cloud-config output is a Jinja template that cloud-init renders on the
// machine, so it honours any of them (and escapes constructs that do not read
// instance data, so that they reach the machine as written). The other
// formats have no Jinja: the Ignition output fills the supported ones from
// Afterburn's metadata and the raw output declares them for its agent; both
// refuse the rest at admission, because kubeadm would otherwise receive the
// text verbatim.
package placeholders

import (
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
)

// Placeholder is one Jinja construct found in a text.
type Placeholder struct {
	// Text is the construct as it appears, delimiters included.
	Text string
	// Metadata is the machine metadata it stands for; empty when it is not a
	// placeholder this project can fill outside cloud-init.
	Metadata rawv1.MetadataKey
	// InstanceData says that it reads cloud-init's instance data (ds.*, v1.*,
	// or a v1 alias such as local_hostname), whether supported or not.
	InstanceData bool
}

// jinja matches Jinja expressions, statements and comments, across lines
// (a YAML emitter may fold a long quoted scalar inside one).
var jinja = regexp.MustCompile(`(?s)\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}`)

// Spellings lists, per metadata key, the expressions that stand for it after
// normalisation (quotes and whitespace dropped, [x] read as .x, - as _).
var Spellings = map[rawv1.MetadataKey][]string{
	rawv1.MetadataLocalHostname: {"ds.meta_data.local_hostname", "ds.meta_data.hostname", "v1.local_hostname", "local_hostname"},
	rawv1.MetadataInstanceID:    {"ds.meta_data.instance_id", "v1.instance_id", "instance_id"},
	rawv1.MetadataLocalIPv4:     {"ds.meta_data.local_ipv4"},
}

// SupportedSummary names the supported placeholders for messages and docs.
func SupportedSummary() string {
	var names []string
	for _, k := range rawv1.MetadataKeys {
		names = append(names, "{{ "+Spellings[k][0]+" }}")
	}
	return strings.Join(names, ", ") + " and their other spellings"
}

// AfterburnAttributes lists, per metadata key, the Afterburn attributes that
// carry it on the platforms that have it, in the order tried: CUSTOM first
// (what a provider writes itself, as the vSphere and Proxmox Flatcar templates
// do), then the platforms. Flatcar names them COREOS_* (with EC2 for AWS and
// GCE for GCP); AFTERBURN_* is upstream Afterburn's spelling.
var AfterburnAttributes = func() map[rawv1.MetadataKey][]string {
	names := map[rawv1.MetadataKey][]string{
		rawv1.MetadataLocalHostname: {"CUSTOM_HOSTNAME", "EC2_HOSTNAME", "AWS_HOSTNAME", "GCE_HOSTNAME", "GCP_HOSTNAME",
			"OPENSTACK_HOSTNAME", "CLOUDSTACK_LOCAL_HOSTNAME", "DIGITALOCEAN_HOSTNAME", "PACKET_HOSTNAME", "HETZNER_HOSTNAME",
			"VULTR_HOSTNAME", "ALIYUN_HOSTNAME", "EXOSCALE_LOCAL_HOSTNAME", "IBMCLOUD_LOCAL_HOSTNAME", "POWERVS_LOCAL_HOSTNAME",
			"KUBEVIRT_HOSTNAME", "PROXMOX_HOSTNAME", "SCALEWAY_HOSTNAME", "VAGRANT_VIRTUALBOX_HOSTNAME"},
		rawv1.MetadataInstanceID: {"CUSTOM_INSTANCE_ID", "EC2_INSTANCE_ID", "AWS_INSTANCE_ID", "OPENSTACK_INSTANCE_ID",
			"CLOUDSTACK_INSTANCE_ID", "HETZNER_INSTANCE_ID", "VULTR_INSTANCE_ID", "ALIYUN_INSTANCE_ID", "EXOSCALE_INSTANCE_ID",
			"IBMCLOUD_INSTANCE_ID", "POWERVS_INSTANCE_ID", "KUBEVIRT_INSTANCE_ID", "PROXMOX_INSTANCE_ID", "SCALEWAY_INSTANCE_ID",
			"AKAMAI_INSTANCE_ID"},
		rawv1.MetadataLocalIPv4: {"CUSTOM_PRIVATE_IPV4", "EC2_IPV4_LOCAL", "AWS_IPV4_LOCAL", "GCE_IP_LOCAL_0", "GCP_IP_LOCAL_0",
			"OPENSTACK_IPV4_LOCAL", "CLOUDSTACK_IPV4_LOCAL", "AZURE_IPV4_DYNAMIC", "DIGITALOCEAN_IPV4_PRIVATE_0",
			"PACKET_IPV4_PRIVATE_0", "ALIYUN_IPV4_PRIVATE", "EXOSCALE_LOCAL_IPV4", "SCALEWAY_PRIVATE_IPV4",
			"AKAMAI_PRIVATE_IPV4_0", "VAGRANT_VIRTUALBOX_PRIVATE_IPV4"},
	}
	out := map[rawv1.MetadataKey][]string{}
	for k, ns := range names {
		for _, prefix := range []string{"COREOS_", "AFTERBURN_"} {
			for _, n := range ns {
				out[k] = append(out[k], prefix+n)
			}
		}
	}
	return out
}()

// v1Aliases are the top-level names cloud-init's Jinja offers for its
// standardised v1 instance data.
var v1Aliases = map[string]bool{
	"availability_zone": true, "cloud_id": true, "cloud_name": true, "distro": true, "distro_release": true,
	"distro_version": true, "instance_id": true, "kernel_release": true, "local_hostname": true, "machine": true,
	"platform": true, "public_ssh_keys": true, "python_version": true, "region": true, "subplatform": true,
	"system_platform": true, "variant": true,
}

// instanceDataRoots are the top-level names of cloud-init's instance data.
var instanceDataRoots = map[string]bool{"ds": true, "v1": true, "v2": true, "merged_cfg": true, "sys_info": true}

// leadingName is the identifier an expression starts with (ds in
// ds.meta_data.x, local_hostname in local_hostname|lower).
func leadingName(expr string) string {
	end := strings.IndexFunc(expr, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	if end < 0 {
		return expr
	}
	return expr[:end]
}

var spellingKeys = func() map[string]rawv1.MetadataKey {
	m := map[string]rawv1.MetadataKey{}
	for k, ss := range Spellings {
		for _, s := range ss {
			m[s] = k
		}
	}
	return m
}()

var normaliser = strings.NewReplacer("'", "", `"`, "", `\`, "", "[", ".", "]", "", "-", "_")

// Find returns every Jinja construct in text, in order.
func Find(text string) []Placeholder {
	if !strings.Contains(text, "{{") && !strings.Contains(text, "{%") && !strings.Contains(text, "{#") {
		return nil // most texts: no regular expression to run
	}
	var out []Placeholder
	for _, t := range jinja.FindAllString(text, -1) {
		p := Placeholder{Text: t}
		if strings.HasPrefix(t, "{{") {
			// {{- x -}} only trims whitespace around the expression.
			expr := strings.Trim(strings.TrimSpace(t[2:len(t)-2]), "-")
			expr = strings.Join(strings.Fields(normaliser.Replace(expr)), "")
			p.Metadata = spellingKeys[expr]
			p.InstanceData = p.Metadata != "" || instanceDataRoots[leadingName(expr)] || v1Aliases[leadingName(expr)]
		}
		out = append(out, p)
	}
	return out
}

// Supported says whether a format without Jinja can fill p.
func (p Placeholder) Supported() bool { return p.Metadata != "" }

// Found is a placeholder and the field it is in.
type Found struct {
	Path *field.Path
	Placeholder
}

// InStrings calls Find on every string reachable from v (a spec or part of
// one) and returns the results with their field paths below base, named by
// JSON tags as the API server names them.
func InStrings(v any, base *field.Path) []Found {
	var out []Found
	walkStrings(reflect.ValueOf(v), base, func(p *field.Path, s string) {
		for _, ph := range Find(s) {
			out = append(out, Found{Path: p, Placeholder: ph})
		}
	})
	return out
}

func walkStrings(v reflect.Value, path *field.Path, fn func(*field.Path, string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkStrings(v.Elem(), path, fn)
		}
	case reflect.String:
		fn(path, v.String())
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes are not text a user wrote
		}
		for i := range v.Len() {
			walkStrings(v.Index(i), path.Index(i), fn)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			walkStrings(iter.Value(), path.Key(iter.Key().String()), fn)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-":
			case name == "" && f.Anonymous:
				walkStrings(v.Field(i), path, fn)
			case name == "":
				walkStrings(v.Field(i), path.Child(f.Name), fn)
			default:
				walkStrings(v.Field(i), path.Child(name), fn)
			}
		}
	}
}
