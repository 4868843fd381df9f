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

package placeholders

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

// metaData is one machine's metadata as a datasource names it.
var metaData = map[rawv1.MetadataKey]string{
	rawv1.MetadataLocalHostname: "ip-10-1-2-3.example.internal",
	rawv1.MetadataInstanceID:    "i-0abc123",
	rawv1.MetadataLocalIPv4:     "10.1.2.3",
}

// spellings are the ways real templates write the placeholders (the
// infrastructure providers' templates use most of these), each with the
// metadata it must stand for.
func spellings() map[string]rawv1.MetadataKey {
	out := map[string]rawv1.MetadataKey{}
	for key, exprs := range Spellings {
		for _, e := range exprs {
			out["{{ "+e+" }}"] = key
			out["{{"+e+"}}"] = key
			out["{{- "+e+" -}}"] = key
			if root, leaf, ok := cutLast(e); ok {
				out[fmt.Sprintf(`{{ %s["%s"] }}`, root, leaf)] = key
				out[fmt.Sprintf(`{{ %s['%s'] }}`, root, strings.ReplaceAll(leaf, "_", "-"))] = key
			}
		}
	}
	return out
}

func cutLast(e string) (string, string, bool) {
	i := strings.LastIndex(e, ".")
	if i < 0 {
		return "", "", false
	}
	return e[:i], e[i+1:], true
}

// TestSpellingsMeanWhatCloudInitRenders renders every supported spelling with
// cloud-init's own Jinja and checks it yields the metadata Find says it
// stands for: the formats without cloud-init fill exactly what cloud-init would.
func TestSpellingsMeanWhatCloudInitRenders(t *testing.T) {
	sp := spellings()
	var doc strings.Builder
	doc.WriteString("## template: jinja\n#cloud-config\n")
	var texts []string
	for text := range sp {
		texts = append(texts, text)
		// Jinja renders the raw text before YAML is read; the x's keep
		// {{- -}} from eating the YAML around the value.
		fmt.Fprintf(&doc, "- x%sx\n", text)
	}
	md := map[string]string{}
	for k, v := range metaData {
		md[string(k)] = v
	}
	md["hostname"] = metaData[rawv1.MetadataLocalHostname] // the OpenStack and vSphere datasources' key
	rendered, err := consumers.CloudInitRender([]byte(strings.Replace(doc.String(), "#cloud-config\n", "#cloud-config\nitems:\n", 1)), md)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Items []string `json:"items"`
	}
	if err := yaml.Unmarshal(rendered, &got); err != nil {
		t.Fatalf("rendered user data does not parse: %v\n%s", err, rendered)
	}
	if len(got.Items) != len(texts) {
		t.Fatalf("cloud-init rendered %d items, want %d", len(got.Items), len(texts))
	}
	for i, text := range texts {
		found := Find(text)
		if len(found) != 1 || found[0].Metadata != sp[text] || !found[0].InstanceData || found[0].Text != text {
			t.Errorf("Find(%q) = %+v, want one placeholder for %s", text, found, sp[text])
			continue
		}
		if want := "x" + metaData[sp[text]] + "x"; got.Items[i] != want {
			t.Errorf("cloud-init renders %q as %q, but Find says it is the %s (%q)", text, got.Items[i], sp[text], want)
		}
	}
}

func TestFindClassifiesJinja(t *testing.T) {
	for _, tc := range []struct {
		text         string
		n            int
		supported    bool
		instanceData bool
	}{
		{"node-{{ ds.meta_data.local_hostname }}", 1, true, true},
		{`{{ ds.meta_data.local_hostname.split(".")[0] }}`, 1, false, true}, // a method call: only Jinja can do it
		{"{{ v1.region }}", 1, false, true},
		{"{{ availability_zone }}", 1, false, true},
		{"{{ local_hostname | upper }}", 1, false, true}, // a filter on a v1 alias
		{"{{ local_hostnames }}", 1, false, false},       // not cloud-init's name
		{"{{ ds.meta_data.proxmox_node }}", 1, false, true},
		{"{{ .Values.image }}", 1, false, false}, // a Go template, not cloud-init's data
		{"{% if true %}x{% endif %}", 2, false, false},
		{"{# comment #}", 1, false, false},
		{"no braces at all", 0, false, false},
		{"'{{ ds.meta_data[''local_hostname''] }}'", 1, true, true}, // as a YAML emitter quotes it
		{"{{ ds.meta_data.local_hostname\n  }}", 1, true, true},     // folded by a YAML emitter
	} {
		found := Find(tc.text)
		if len(found) != tc.n {
			t.Errorf("Find(%q): %d constructs, want %d", tc.text, len(found), tc.n)
			continue
		}
		if tc.n > 0 && (found[0].Supported() != tc.supported || found[0].InstanceData != tc.instanceData) {
			t.Errorf("Find(%q) = %+v, want supported=%v instanceData=%v", tc.text, found[0], tc.supported, tc.instanceData)
		}
	}
}

func TestInStringsNamesFieldsAsTheAPIServer(t *testing.T) {
	jc := upstreambootstrapv1.JoinConfiguration{NodeRegistration: upstreambootstrapv1.NodeRegistrationOptions{
		Name:             "{{ ds.meta_data.local_hostname }}",
		KubeletExtraArgs: []upstreambootstrapv1.Arg{{Name: "provider-id", Value: ptr.To("aws:///{{ v1.region }}/x")}},
	}}
	found := InStrings(&jc, field.NewPath("spec", "joinConfiguration"))
	want := []string{"spec.joinConfiguration.nodeRegistration.name", "spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value"}
	if len(found) != len(want) {
		t.Fatalf("found %+v, want %v", found, want)
	}
	for i, f := range found {
		if f.Path.String() != want[i] {
			t.Errorf("path %d = %s, want %s", i, f.Path, want[i])
		}
	}
}
