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

package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	upstreamadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	upstreamfeature "sigs.k8s.io/cluster-api/feature"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
)

// All tests share one API server and one webhook server; the gates are a
// mutable instance the tests switch.
var (
	env   *testenv.Environment
	gates featuregate.MutableFeatureGate
)

func TestMain(m *testing.M) {
	gates = feature.NewFeatureGates()
	os.Exit(testenv.Run(testenv.RunInput{
		M:          m,
		Management: testenv.Options{WithWebhooks: true, WithClusterAPI: true},
		Setup: func(s *testenv.Shared) (func(), error) {
			env = s.Management
			stop, err := env.ServeWebhooks(gates)
			return func() { _ = stop() }, err
		},
	}))
}

func setGates(t *testing.T, ignition, raw bool) {
	t.Helper()
	if err := gates.SetFromMap(map[string]bool{string(feature.KubeadmBootstrapFormatIgnition): ignition, string(feature.KubeadmBootstrapFormatRaw): raw}); err != nil {
		t.Fatal(err)
	}
}

var nameSeq int

func config(format bootstrapv1.Format) *bootstrapv1.KubeadmConfig {
	nameSeq++
	c := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("config-%d", nameSeq), Namespace: "default"}}
	c.Spec.Format = format
	c.Spec.JoinConfiguration.NodeRegistration.Name = "node-a"
	return c
}

func template(spec bootstrapv1.KubeadmConfigSpec) *bootstrapv1.KubeadmConfigTemplate {
	nameSeq++
	return &bootstrapv1.KubeadmConfigTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("template-%d", nameSeq), Namespace: "default"},
		Spec:       bootstrapv1.KubeadmConfigTemplateSpec{Template: bootstrapv1.KubeadmConfigTemplateResource{Spec: spec}},
	}
}

// causes returns the field paths of an Invalid error from the API server.
func causes(t *testing.T, err error) []string {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error from admission, got %v", err)
	}
	var out []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		out = append(out, c.Field)
	}
	sort.Strings(out)
	return out
}

func TestGatesDecideTheFormat(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		format         bootstrapv1.Format
		gate, variable string
	}{
		{bootstrapv1.Ignition, "KubeadmBootstrapFormatIgnition", "EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION"},
		{bootstrapv1.Raw, "KubeadmBootstrapFormatRaw", "EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW"},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			setGates(t, false, false)
			err := env.Client.Create(ctx, config(tc.format))
			if got := causes(t, err); !cmp.Equal(got, []string{"spec.format"}) || !strings.Contains(err.Error(), tc.gate) || !strings.Contains(err.Error(), tc.variable) {
				t.Fatalf("KubeadmConfig: want spec.format naming %s and %s, got %v: %v", tc.gate, tc.variable, got, err)
			}
			tmpl := template(config(tc.format).Spec)
			err = env.Client.Create(ctx, tmpl)
			if got := causes(t, err); !cmp.Equal(got, []string{"spec.template.spec.format"}) {
				t.Fatalf("KubeadmConfigTemplate: %v", got)
			}

			setGates(t, tc.format == bootstrapv1.Ignition, tc.format == bootstrapv1.Raw)
			if err := env.Client.Create(ctx, config(tc.format)); err != nil {
				t.Fatalf("gate on: %v", err)
			}
			if err := env.Client.Create(ctx, template(config(tc.format).Spec)); err != nil {
				t.Fatalf("gate on, template: %v", err)
			}
		})
	}
}

func TestRawRejectsEverythingButKubeadmAtOnce(t *testing.T) {
	setGates(t, true, true)
	c := config(bootstrapv1.Raw)
	c.Spec.Files = []upstreambootstrapv1.File{{Path: "/etc/x", Content: "x"}}
	c.Spec.Users = []upstreambootstrapv1.User{{Name: "u"}}
	c.Spec.NTP = upstreambootstrapv1.NTP{Servers: []string{"ntp"}}
	c.Spec.DiskSetup = upstreambootstrapv1.DiskSetup{Filesystems: []upstreambootstrapv1.Filesystem{{Device: "/dev/sdb", Filesystem: "ext4"}}}
	c.Spec.Mounts = []upstreambootstrapv1.MountPoints{{"/dev/sdb", "/data"}}
	c.Spec.BootCommands = []string{"b"}
	c.Spec.PreKubeadmCommands = []string{"p"}
	c.Spec.PostKubeadmCommands = []string{"q"}
	c.Spec.Verbosity = ptr.To[int32](3)
	c.Spec.Ignition.Butane.AdditionalConfig = "storage: {}\n"
	want := []string{"spec.bootCommands", "spec.diskSetup", "spec.files[0].path", "spec.ignition", "spec.mounts", "spec.ntp", "spec.postKubeadmCommands", "spec.preKubeadmCommands", "spec.users", "spec.verbosity"}

	err := env.Client.Create(context.Background(), c)
	if got := causes(t, err); !cmp.Equal(got, want) {
		t.Fatalf("KubeadmConfig causes (-want +got):\n%s", cmp.Diff(want, got))
	}
	if !strings.Contains(err.Error(), "the raw format carries kubeadm configuration only") {
		t.Errorf("message does not explain: %v", err)
	}

	var tmplWant []string
	for _, p := range want {
		tmplWant = append(tmplWant, strings.Replace(p, "spec.", "spec.template.spec.", 1))
	}
	if got := causes(t, env.Client.Create(context.Background(), template(c.Spec))); !cmp.Equal(got, tmplWant) {
		t.Fatalf("KubeadmConfigTemplate causes (-want +got):\n%s", cmp.Diff(tmplWant, got))
	}
}

func TestIgnitionRestrictionsAndButane(t *testing.T) {
	setGates(t, true, true)
	ctx := context.Background()
	c := config(bootstrapv1.Ignition)
	c.Spec.BootCommands = []string{"b"}
	c.Spec.Files = []upstreambootstrapv1.File{{Path: "/x", Content: "H4sI", Encoding: upstreambootstrapv1.Gzip}}
	c.Spec.Users = []upstreambootstrapv1.User{{Name: "u", Inactive: ptr.To(true)}}
	c.Spec.DiskSetup.Partitions = []upstreambootstrapv1.Partition{{Device: "/dev/sdb", TableType: "mbr", Layout: ptr.To(true)}}
	c.Spec.DiskSetup.Filesystems = []upstreambootstrapv1.Filesystem{{Device: "/dev/sdb", Filesystem: "ext4", Partition: "auto", ReplaceFS: "ntfs"}}
	want := []string{"spec.bootCommands", "spec.diskSetup.filesystems[0].partition", "spec.diskSetup.filesystems[0].replaceFS",
		"spec.diskSetup.partitions[0].tableType", "spec.files[0].encoding", "spec.users[0].inactive"}
	if got := causes(t, env.Client.Create(ctx, c)); !cmp.Equal(got, want) {
		t.Fatalf("(-want +got):\n%s", cmp.Diff(want, got))
	}

	c = config(bootstrapv1.Ignition)
	c.Spec.Ignition.Butane = bootstrapv1.ButaneConfig{AdditionalConfig: "storage:\n  filez: []\n", Strict: ptr.To(true)}
	err := env.Client.Create(ctx, c)
	if got := causes(t, err); !cmp.Equal(got, []string{"spec.ignition.butane.additionalConfig"}) || !strings.Contains(err.Error(), "filez") {
		t.Fatalf("butane with an unknown key under strict: %v %v", got, err)
	}
	c.Spec.Ignition.Butane.Strict = ptr.To(false)
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatalf("butane warnings without strict must pass: %v", err)
	}

	c = config(bootstrapv1.CloudConfig)
	c.Spec.Ignition.Butane.AdditionalConfig = "storage: {}\n"
	if got := causes(t, env.Client.Create(ctx, c)); !cmp.Equal(got, []string{"spec.format"}) {
		t.Fatalf("ignition settings with cloud-config must be refused on spec.format, as upstream: %v", got)
	}
}

func TestUpdates(t *testing.T) {
	setGates(t, true, true)
	ctx := context.Background()
	c := config("")
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c.Spec.Format != bootstrapv1.CloudConfig {
		t.Fatalf("format not defaulted: %q", c.Spec.Format)
	}

	// Before the data secret exists, the format may change.
	c.Spec.Format = bootstrapv1.Raw
	if err := env.Client.Update(ctx, c); err != nil {
		t.Fatalf("format change before the data secret: %v", err)
	}
	// Once the controller recorded the data secret, it may not.
	c.Status.DataSecretName = c.Name
	c.Status.Initialization.DataSecretCreated = ptr.To(true)
	if err := env.Client.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Format = bootstrapv1.CloudConfig
	err := env.Client.Update(ctx, c)
	if got := causes(t, err); !cmp.Equal(got, []string{"spec.format"}) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("format change after the data secret: %v %v", got, err)
	}
	// Other spec changes stay allowed, as upstream.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
		t.Fatal(err)
	}
	c.Spec.JoinConfiguration.NodeRegistration.Name = "renamed"
	if err := env.Client.Update(ctx, c); err != nil {
		t.Fatalf("spec change after the data secret: %v", err)
	}
	// Updates are validated like creates.
	c.Spec.Files = []upstreambootstrapv1.File{{Path: "/x", Content: "x"}}
	if got := causes(t, env.Client.Update(ctx, c)); !cmp.Equal(got, []string{"spec.files[0].path"}) {
		t.Fatalf("invalid update: %v", got)
	}

	// A MachinePool's config is rendered again when it changes (ClusterClass
	// patches it in place): its format may change after the data secret,
	// and what it changes to is validated with its annotations.
	p := config(bootstrapv1.Raw)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: "pool", UID: "1"}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status.DataSecretName = p.Name
	p.Status.Initialization.DataSecretCreated = ptr.To(true)
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Format = bootstrapv1.Ignition
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatalf("a MachinePool's config changing format after its data secret: %v", err)
	}
	p.Annotations = map[string]string{bootstrapv1.FormatAnnotation: string(bootstrapv1.Raw)}
	err = env.Client.Update(ctx, p)
	if got := causes(t, err); len(got) != 1 || !strings.Contains(got[0], bootstrapv1.FormatAnnotation) || !strings.Contains(err.Error(), "contradicts") {
		t.Fatalf("a MachinePool's config contradicting its annotation: %v", err)
	}

	tmpl := template(bootstrapv1.KubeadmConfigSpec{JoinConfiguration: c.Spec.JoinConfiguration})
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	if tmpl.Spec.Template.Spec.Format != bootstrapv1.CloudConfig {
		t.Fatalf("template format not defaulted: %q", tmpl.Spec.Template.Spec.Format)
	}
	tmpl.Spec.Template.Spec.Format = bootstrapv1.Ignition
	if err := env.Client.Update(ctx, tmpl); err != nil {
		t.Fatalf("templates may change format (as upstream, they are not immutable): %v", err)
	}
	tmpl.Spec.Template.ObjectMeta.Labels = map[string]string{"bad key!": "v"}
	if got := causes(t, env.Client.Update(ctx, tmpl)); len(got) != 1 || !strings.HasPrefix(got[0], "spec.template.metadata.labels") {
		t.Fatalf("template metadata must be validated: %v", got)
	}
}

// TestUpdatesRatchet: objects admitted before a rule applied to them (here:
// Ignition objects stored while its gate was on) stay writable through the
// API server for what does not touch the refused field; a change of that
// field is refused as on create.
func TestUpdatesRatchet(t *testing.T) {
	ctx := context.Background()
	setGates(t, true, true)
	c := config(bootstrapv1.Ignition)
	tmpl := template(bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.Ignition})
	for _, o := range []client.Object{c, tmpl} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	setGates(t, false, true)
	defer setGates(t, true, true)
	c.Labels = map[string]string{"synced": "yes"}
	c.Spec.JoinConfiguration.NodeRegistration.Name = "renamed"
	if err := env.Client.Update(ctx, c); err != nil {
		t.Fatalf("an unrelated update of a stored Ignition config with the gate now off: %v", err)
	}
	tmpl.Labels = map[string]string{"synced": "yes"}
	if err := env.Client.Update(ctx, tmpl); err != nil {
		t.Fatalf("an unrelated update of a stored Ignition template with the gate now off: %v", err)
	}
	c.Spec.Format = bootstrapv1.Raw
	if err := env.Client.Update(ctx, c); err != nil {
		t.Fatalf("leaving the gated format: %v", err)
	}
	c.Spec.Format = bootstrapv1.Ignition
	if err := env.Client.Update(ctx, c); err == nil || !strings.Contains(err.Error(), string(feature.KubeadmBootstrapFormatIgnition)) {
		t.Fatalf("changing to the gated format must be refused: %v", err)
	}
}

// TestUpstreamManifestsAreAdmitted: manifests written the way upstream's
// documentation, templates and KubeadmControlPlane write them are admitted by
// upstream v1.14.2's own validation, and are then admitted here, unchanged
// but for the defaulted format.
func TestUpstreamManifestsAreAdmitted(t *testing.T) {
	setGates(t, true, false)
	if err := upstreamfeature.MutableGates.SetFromMap(map[string]bool{string(upstreamfeature.KubeadmBootstrapFormatIgnition): true}); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/upstream/*.yaml")
	if err != nil || len(files) < 8 {
		t.Fatalf("corpus: %v (%d files)", err, len(files))
	}
	ctx := context.Background()
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetNamespace("default")

			specPath := []string{"spec"}
			switch u.GetKind() {
			case "KubeadmConfig":
				var up upstreambootstrapv1.KubeadmConfig
				if err := yaml.UnmarshalStrict(data, &up); err != nil {
					t.Fatalf("not an upstream KubeadmConfig: %v", err)
				}
				if _, err := (&upstreamadmission.KubeadmConfig{}).ValidateCreate(ctx, &up); err != nil {
					t.Fatalf("upstream v1.14.2 rejects the corpus entry: %v", err)
				}
			case "KubeadmConfigTemplate":
				specPath = []string{"spec", "template", "spec"}
				var up upstreambootstrapv1.KubeadmConfigTemplate
				if err := yaml.UnmarshalStrict(data, &up); err != nil {
					t.Fatalf("not an upstream KubeadmConfigTemplate: %v", err)
				}
				if _, err := (&upstreamadmission.KubeadmConfigTemplate{}).ValidateCreate(ctx, &up); err != nil {
					t.Fatalf("upstream v1.14.2 rejects the corpus entry: %v", err)
				}
			default:
				t.Fatalf("unexpected kind %s", u.GetKind())
			}

			wantSpec, _, _ := unstructured.NestedMap(u.Object, specPath...)
			if _, ok := wantSpec["format"]; !ok {
				wantSpec["format"] = "cloud-config"
			}
			if err := env.Client.Create(ctx, u); err != nil {
				t.Fatalf("not admitted here: %v", err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
				t.Fatal(err)
			}
			gotSpec, _, _ := unstructured.NestedMap(got.Object, specPath...)
			if diff := cmp.Diff(normalize(t, wantSpec), normalize(t, gotSpec)); diff != "" {
				t.Errorf("stored spec differs from the manifest (-want +got):\n%s", diff)
			}
		})
	}
}

// normalize makes numbers compare equal whether YAML or the API server produced them.
func normalize(t *testing.T, m map[string]any) any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// warningCollector keeps the API server's warnings.
type warningCollector struct{ warnings []string }

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.warnings = append(w.warnings, text)
}

// A non-strict Butane document that Butane warns about is admitted, and the
// warning reaches the client (kubectl prints it), without the document's values.
func TestButaneWarningsReachTheClient(t *testing.T) {
	setGates(t, true, false)
	collector := &warningCollector{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = collector
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	kc := config(bootstrapv1.Ignition)
	kc.Name = "butane-warning"
	// 644 is decimal: Butane warns that it means 0o1204, not 0644.
	kc.Spec.Ignition.Butane = bootstrapv1.ButaneConfig{AdditionalConfig: "storage:\n  files:\n  - path: /etc/secret-path-x\n    mode: 644\n"}
	if err := c.Create(context.Background(), kc); err != nil {
		t.Fatalf("a non-strict document with warnings must be admitted: %v", err)
	}
	got := strings.Join(collector.warnings, "\n")
	if !strings.Contains(got, "spec.ignition.butane.additionalConfig") || !strings.Contains(got, "octal") {
		t.Fatalf("warnings %q, want Butane's decimal-mode warning on spec.ignition.butane.additionalConfig", collector.warnings)
	}
	if strings.Contains(got, "secret-path-x") {
		t.Fatalf("the warning quotes the document: %s", got)
	}
}
