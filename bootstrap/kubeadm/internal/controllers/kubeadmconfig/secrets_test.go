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

package kubeadmconfig_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// TestNoSecretMaterialLeaks plants secret values in every place a spec can
// take them from (contentFrom, passwdFrom, a template that fails), has the
// manager bootstrap machines of every format with them, then scans
// everything the manager logged, every event and every condition for the
// planted values, the bootstrap tokens and the cluster's CA keys.
func TestNoSecretMaterialLeaks(t *testing.T) {
	startManager(t)
	f := newRunningCluster(t)

	fileValue := "PLANTED-file-" + rand.String(16) + "\nsecond line PLANTED-" + rand.String(16) + "\n"
	passwd := "$6$PLANTED" + rand.String(16)
	templateName := "PLANTED-template-" + rand.String(16)
	f.secret("creds", map[string]string{
		"file":      fileValue,
		"passwd":    passwd,
		"bad-tmpl":  `{{ template "` + templateName + `" }}`,
		"good-tmpl": `{{ if .controlPlane }}{{ .controlPlane.version }}{{ else }}` + templateName + `{{ end }}`,
	})
	from := func(key string) upstreambootstrapv1.FileSource {
		return upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "creds", Key: key}}
	}
	withSecrets := func(format bootstrapv1.Format, controlPlane bool, templateKey string) bootstrapv1.KubeadmConfigSpec {
		s := joinSpec(format, controlPlane)
		s.Files = []upstreambootstrapv1.File{
			{Path: "/etc/planted.conf", ContentFrom: from("file")},
			{Path: "/etc/templated.conf", ContentFrom: from(templateKey), ContentFormat: upstreambootstrapv1.FileContentFormatTemplate},
		}
		s.Users = []upstreambootstrapv1.User{{Name: "ops", PasswdFrom: upstreambootstrapv1.PasswdSource{Secret: upstreambootstrapv1.SecretPasswdSource{Name: "creds", Key: "passwd"}}}}
		return s
	}

	var good, bad []*bootstrapv1.KubeadmConfig
	for _, format := range []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition} {
		_, w := f.machine("worker-"+string(format), false, withSecrets(format, false, "good-tmpl"))
		_, cp := f.machine("cp-"+string(format), true, withSecrets(format, true, "good-tmpl"))
		_, b := f.machine("broken-"+string(format), false, withSecrets(format, false, "bad-tmpl"))
		good, bad = append(good, w, cp), append(bad, b)
	}
	for _, cfg := range good {
		sec := f.waitForData(cfg)
		// The scan below means something only if the values were resolved.
		if cfg.Spec.Format == bootstrapv1.CloudConfig && (!bytes.Contains(sec.Data["value"], []byte(strings.Split(fileValue, "\n")[0])) ||
			!bytes.Contains(sec.Data["value"], []byte(passwd)) || !bytes.Contains(sec.Data["value"], []byte(templateName))) {
			t.Fatalf("%s: the planted values did not reach the data", cfg.Name)
		}
	}
	for _, cfg := range bad {
		f.waitForReason(cfg, upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition, bootstrapv1.KubeadmConfigFileTemplateFailedReason)
		// Events are sent in the background: the scan must see this one.
		f.waitFor("a warning event for "+cfg.Name, 10*time.Second, func() bool { return hasEvent(t, cfg, bootstrapv1.KubeadmConfigFileTemplateFailedReason) })
	}

	// What must never be seen.
	forbidden := []string{passwd, templateName, strings.Split(fileValue, "\n")[0], strings.Split(fileValue, "\n")[1]}
	for _, cfg := range good {
		for _, tok := range tokensOf(t, cfg) {
			id, sec := string(tok.Data[bootstrapapi.BootstrapTokenIDKey]), string(tok.Data[bootstrapapi.BootstrapTokenSecretKey])
			forbidden = append(forbidden, id+"."+sec, sec)
		}
	}
	for _, purpose := range []secret.Purpose{secret.ClusterCA, secret.EtcdCA, secret.FrontProxyCA, secret.ServiceAccount} {
		s := &corev1.Secret{}
		if err := mgmt.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: secret.Name(f.cluster.Name, purpose)}, s); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(s.Data[secret.TLSKeyDataName]), "\n") {
			if len(line) > 20 && !strings.HasPrefix(line, "-----") {
				forbidden = append(forbidden, line)
			}
		}
	}
	if len(forbidden) < 10 {
		t.Fatalf("only %d values to look for", len(forbidden))
	}

	// Where they must not be.
	places := map[string]string{"manager logs": logs.String()}
	var conds strings.Builder
	list := &bootstrapv1.KubeadmConfigList{}
	if err := mgmt.Client.List(f.ctx, list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range list.Items {
		for _, c := range cfg.Status.Conditions {
			conds.WriteString(c.Message + "\n")
		}
		if cfg.Status.Deprecated != nil && cfg.Status.Deprecated.V1Beta1 != nil {
			for _, c := range cfg.Status.Deprecated.V1Beta1.Conditions {
				conds.WriteString(c.Message + "\n")
			}
		}
	}
	places["conditions"] = conds.String()
	var evs strings.Builder
	newEvents := &eventsv1.EventList{}
	if err := mgmt.Client.List(f.ctx, newEvents, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range newEvents.Items {
		evs.WriteString(e.Reason + " " + e.Note + "\n")
	}
	oldEvents := &corev1.EventList{}
	if err := mgmt.Client.List(f.ctx, oldEvents, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range oldEvents.Items {
		evs.WriteString(e.Reason + " " + e.Message + "\n")
	}
	places["events"] = evs.String()

	for place, text := range places {
		if leaked := containsAny(text, forbidden...); leaked != "" {
			t.Errorf("%s carry secret material (%d characters starting %q)", place, len(leaked), leaked[:4])
		}
	}
}
