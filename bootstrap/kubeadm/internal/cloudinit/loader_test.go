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

package cloudinit_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/cloudinit"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan/plantest"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/consumers"
)

// hostile are strings a user can put in commands, file contents and user
// fields that YAML 1.1 and YAML 1.2 read differently, or that a careless
// writer breaks: keywords, numbers, indicators, comments, quotes, leading
// spaces, control characters and line separators.
var hostile = []string{
	"yes", "No", "on", "OFF", "y", "~", "null", "0755", "1:20", "1e3", ".inf", "2001-12-14", "<<", "=",
	"key: value", "a #comment", "#!/bin/sh", "- item", "? x", "'q'", `"q"`, "|", ">", "@", "`x`", "{a}", "[a]",
	"&a", "*a", "!t", "%p", "  leading", "trailing  ", "tab\there", "line\nbreak", "crlf\r\nend", "nel\u0085",
	"ls\u2028", "ps\u2029", "bom\ufeff", "nul\x00", "esc\x1b", "del\x7f", "é 日本 🎉", "---", "...",
	"echo \"$HOME\" | tee -a /tmp/x && exit 0", "multi\nline\n\n", "\n", "",
	// Text that looks like Jinja to cloud-init's template handler.
	"image: {{ .Values.image }}", "{{ foo }}", "n=${#arr[@]}", "{{", "}}", "{%", "{#", "{{{x}}}", "{{- if .X }}y{{ end }}",
	"${{ x }", "{{ local_hostnames }}",
}

// withHostileStrings puts hostile strings everywhere a spec carries text that
// reaches the user data.
func withHostileStrings(r *rand.Rand, s *bootstrapv1.KubeadmConfigSpec) {
	pick := func() string { return hostile[r.IntN(len(hostile))] }
	s.PreKubeadmCommands = []string{pick(), pick()}
	s.PostKubeadmCommands = []string{pick()}
	s.BootCommands = []string{pick()}
	s.Files = append(s.Files,
		upstreambootstrapv1.File{Path: "/etc/hostile-" + fmt.Sprint(r.IntN(1000)), Content: pick() + pick(), Owner: "root:root", Permissions: "0600"},
		upstreambootstrapv1.File{Path: "/etc/hostile-2", Content: pick()},
	)
	s.Users = append(s.Users, upstreambootstrapv1.User{Name: "u" + fmt.Sprint(r.IntN(100)), Gecos: pick(), Shell: pick(),
		SSHAuthorizedKeys: []string{pick(), pick()}, Sudo: pick()})
	s.Mounts = append(s.Mounts, upstreambootstrapv1.MountPoints{pick(), "/mnt/" + fmt.Sprint(r.IntN(9)), pick()})
	s.NTP = upstreambootstrapv1.NTP{Servers: []string{pick()}}
}

// TestCloudInitLoadsExactlyWhatThePlanHolds renders a corpus of specs, half
// of them full of hostile strings, has cloud-init's own Jinja handler render
// and its own loader load every document, and compares what it read with the structure built from the plan,
// value for value and type for type.
func TestCloudInitLoadsExactlyWhatThePlanHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 11))
	var docs [][]byte
	var wants []any
	var names []string
	for i := range 120 {
		action := plan.Actions[i%len(plan.Actions)]
		spec := plantest.Random(r, bootstrapv1.CloudConfig, action)
		if i%2 == 1 {
			withHostileStrings(r, spec)
		}
		p, err := plan.Build(plantest.Input(spec, action))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		out, err := cloudinit.Render(p)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		c, err := cloudinit.Build(p)
		if err != nil {
			t.Fatal(err)
		}
		// The structure as JSON values: what an exact loader must produce.
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var want any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		docs, wants, names = append(docs, out), append(wants, want), append(names, fmt.Sprintf("%s-%03d", action, i))
	}
	loaded, err := consumers.CloudInitLoadAll(docs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range docs {
		if !reflect.DeepEqual(loaded[i], wants[i]) {
			got, err := json.MarshalIndent(loaded[i], "", " ")
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.MarshalIndent(wants[i], "", " ")
			if err != nil {
				t.Fatal(err)
			}
			t.Errorf("%s: cloud-init read something else than the plan holds:\ngot  %s\nwant %s", names[i], got, want)
		}
	}
}

// TestJinjaAsUpstreamWhereMeant: what a user can mean as Jinja is rendered
// by cloud-init as upstream's output would be; everything else reaches the
// machine as written.
func TestJinjaAsUpstreamWhereMeant(t *testing.T) {
	host := consumers.SampleMetaData["local-hostname"]
	for _, tc := range []struct{ written, onMachine string }{
		{"{{ ds.meta_data.local_hostname }}", host},
		{"{{ v1.local_hostname | upper }}", strings.ToUpper(host)},
		{`{{ ds.meta_data.local_hostname.split("-")[0] }}`, "node"},
		{"{{ '{{' }} .Values {{ '}}' }}", "{{ .Values }}"},                        // Jinja's own escape, as before
		{"{% raw %}{{ .Values }} ${#a[@]}{% endraw %}", "{{ .Values }} ${#a[@]}"}, // a raw block, as before
		{"{{ .Values.image }}", "{{ .Values.image }}"},
		{"n=${#arr[@]}", "n=${#arr[@]}"},
		{"{{ undefined_name }}", "{{ undefined_name }}"},
	} {
		spec := plantest.Base(bootstrapv1.CloudConfig, plan.ActionJoin)
		spec.Files = []upstreambootstrapv1.File{{Path: "/etc/x", Content: tc.written}}
		spec.PreKubeadmCommands = []string{tc.written}
		p, err := plan.Build(plantest.Input(spec, plan.ActionJoin))
		if err != nil {
			t.Fatal(err)
		}
		out, err := cloudinit.Render(p)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := consumers.CloudInitLoad(out)
		if err != nil {
			t.Errorf("%q: %v", tc.written, err)
			continue
		}
		doc := loaded.(map[string]any)
		content := doc["write_files"].([]any)[0].(map[string]any)["content"]
		command := doc["runcmd"].([]any)[0]
		if content != tc.onMachine || !strings.Contains(fmt.Sprint(command), tc.onMachine) {
			t.Errorf("%q reaches the machine as file %q and command %q, want %q", tc.written, content, command, tc.onMachine)
		}
	}
}
