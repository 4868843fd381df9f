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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/controllers/kubeadmconfig"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

// badInput is a KubeadmConfig that cannot get its data (yet), and the
// condition that must say why.
type badInput struct {
	name string
	// setup creates what the case needs and returns the config.
	setup func(f *fixture) *bootstrapv1.KubeadmConfig
	// reconciler, when set, replaces the default one (other gates, no workload cluster).
	reconciler func(f *fixture) *kubeadmconfig.Reconciler
	condition  string
	reason     string
	// says, when set, are what the condition's message must name.
	says []string
	// waits says the controller looks again by itself (a requeue), because
	// what it waits for is not something it watches.
	waits bool
	// fix, when set, repairs the input: the next reconcile must produce the data.
	fix func(f *fixture, cfg *bootstrapv1.KubeadmConfig)
}

func withFiles(files ...upstreambootstrapv1.File) bootstrapv1.KubeadmConfigSpec {
	s := joinSpec(bootstrapv1.CloudConfig, false)
	s.Files = files
	return s
}

func (f *fixture) secret(name string, data map[string]string) {
	f.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, StringData: data}
	f.create(s)
}

func badInputs() []badInput {
	dataCondition := upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition
	return []badInput{
		{
			name: "contentFrom secret missing",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				_, cfg := f.machine("w", false, withFiles(upstreambootstrapv1.File{Path: "/etc/app.conf",
					ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "app", Key: "conf"}}}))
				return cfg
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigReferencedSecretNotFoundReason, waits: true,
			fix: func(f *fixture, _ *bootstrapv1.KubeadmConfig) { f.secret("app", map[string]string{"conf": "x=1"}) },
		},
		{
			name: "passwdFrom key missing",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				f.secret("users", map[string]string{"other": "x"})
				s := joinSpec(bootstrapv1.CloudConfig, false)
				s.Users = []upstreambootstrapv1.User{{Name: "ops", PasswdFrom: upstreambootstrapv1.PasswdSource{Secret: upstreambootstrapv1.SecretPasswdSource{Name: "users", Key: "hash"}}}}
				_, cfg := f.machine("w", false, s)
				return cfg
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigReferencedSecretNotFoundReason, waits: true,
		},
		{
			name: "cluster gone",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				m := &clusterv1.Machine{
					ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: f.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "gone"}},
					Spec: clusterv1.MachineSpec{ClusterName: "gone", Version: kubernetesVersion,
						Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: "orphan"}},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachine", Name: "orphan"}},
				}
				f.create(m)
				return f.config("orphan", m, joinSpec(bootstrapv1.CloudConfig, false))
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigClusterNotFoundReason,
		},
		{
			name: "owner gone",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				ghost := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "ghost", UID: "4c1c4c6e-0000-0000-0000-000000000000"}}
				return f.config("ghost", ghost, joinSpec(bootstrapv1.CloudConfig, false))
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigOwnerNotFoundReason,
		},
		{
			name: "workload cluster unreachable",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				_, cfg := f.machine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
				return cfg
			},
			reconciler: func(f *fixture) *kubeadmconfig.Reconciler {
				return f.reconciler(clustercache.NewFakeEmptyClusterCache(), allGates(f.t))
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigWorkloadClusterUnreachableReason, waits: true,
		},
		{
			name: "Kubernetes version kubeadm cannot configure",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				m, cfg := f.machine("old", false, joinSpec(bootstrapv1.CloudConfig, false))
				before := m.DeepCopy()
				m.Spec.Version = "v1.19.0"
				if err := mgmt.Client.Patch(f.ctx, m, client.MergeFrom(before)); err != nil {
					f.t.Fatal(err)
				}
				return cfg
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigInvalidKubernetesVersionReason,
			says: []string{"v1.19.0", "v1.31 to v1.37"},
		},
		{
			name: "template that never ends",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				_, cfg := f.machine("w", false, withFiles(upstreambootstrapv1.File{Path: "/etc/loop", Content: "{{ range 100000000000 }}{{ end }}",
					ContentFormat: upstreambootstrapv1.FileContentFormatTemplate}))
				return cfg
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigFileTemplateFailedReason,
		},
		{
			name: "renderer refuses the plan",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				// Admission cannot read a Secret's content: base64 that
				// does not decode reaches the renderer, which refuses it
				// rather than have cloud-init stop writing files.
				f.secret("b64", map[string]string{"k": "not base64!"})
				_, cfg := f.machine("w", false, withFiles(upstreambootstrapv1.File{Path: "/etc/b64", Encoding: upstreambootstrapv1.Base64,
					ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "b64", Key: "k"}}}))
				return cfg
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigRenderFailedReason,
		},
		{
			name: "content over the budget",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				// Two files naming one key of 600 KiB: 1.2 MiB of content.
				f.secret("big", map[string]string{"k": strings.Repeat("x", 600<<10)})
				from := upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "big", Key: "k"}}
				_, cfg := f.machine("w", false, withFiles(upstreambootstrapv1.File{Path: "/etc/a", ContentFrom: from}, upstreambootstrapv1.File{Path: "/etc/b", ContentFrom: from}))
				return cfg
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigContentTooLargeReason,
		},
		{
			name: "data larger than a Secret holds",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				// 1000 KiB of content, within the budget, is 1.3 MiB as
				// Ignition's base64.
				f.secret("big", map[string]string{"k": strings.Repeat("x", 1000<<10)})
				s := withFiles(upstreambootstrapv1.File{Path: "/etc/a",
					ContentFrom: upstreambootstrapv1.FileSource{Secret: upstreambootstrapv1.SecretFileSource{Name: "big", Key: "k"}}})
				s.Format = bootstrapv1.Ignition
				_, cfg := f.machine("w", false, s)
				return cfg
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigBootstrapDataTooLargeReason,
		},
		{
			name: "format gate off on the controller",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				_, cfg := f.machine("w", false, joinSpec(bootstrapv1.Raw, false))
				return cfg
			},
			reconciler: func(f *fixture) *kubeadmconfig.Reconciler {
				return f.reconciler(nil, feature.NewFeatureGates())
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigFormatFeatureDisabledReason,
		},
		{
			name: "MachinePool gate off",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				pool := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: f.ns, UID: "4c1c4c6e-0000-0000-0000-000000000001"}}
				return f.config("pool", pool, joinSpec(bootstrapv1.CloudConfig, false))
			},
			reconciler: func(f *fixture) *kubeadmconfig.Reconciler {
				g := allGates(f.t)
				if err := g.(interface{ Set(string) error }).Set("MachinePool=false"); err != nil {
					f.t.Fatal(err)
				}
				return f.reconciler(nil, g)
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigMachinePoolFeatureDisabledReason,
		},
		{
			name: "a Secret of the data secret's name belongs to someone else",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				f.secret("w", map[string]string{"value": "not ours"})
				_, cfg := f.machine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
				return cfg
			},
			condition: dataCondition, reason: bootstrapv1.KubeadmConfigDataSecretConflictReason,
		},
		{
			name: "cluster certificates missing",
			setup: func(f *fixture) *bootstrapv1.KubeadmConfig {
				for _, name := range []string{"-ca", "-etcd", "-proxy", "-sa"} {
					_ = mgmt.Client.Delete(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.cluster.Name + name}})
				}
				_, cfg := f.machine("w", false, joinSpec(bootstrapv1.CloudConfig, false))
				return cfg
			},
			condition: upstreambootstrapv1.KubeadmConfigCertificatesAvailableCondition, reason: bootstrapv1.KubeadmConfigCertificatesMissingReason, waits: true,
			fix: func(f *fixture, _ *bootstrapv1.KubeadmConfig) { f.clusterCertificates() },
		},
	}
}

// reconciler is a direct reconciler on the real API servers; cc nil means the
// fixture's workload cluster is reachable.
func (f *fixture) reconciler(cc clustercache.ClusterCache, gates featuregate.FeatureGate) *kubeadmconfig.Reconciler {
	if cc == nil {
		cc = clustercache.NewFakeClusterCache(workload.Client, client.ObjectKeyFromObject(f.cluster))
	}
	r, _ := direct(mgmt.Client, cc, gates)
	return r
}

// TestBadInputsGiveConditions: each input that cannot produce data ends in a
// condition with its own reason, no error, no half-written state, and a
// requeue only where waiting can help; a fixed input then produces its data.
func TestBadInputsGiveConditions(t *testing.T) {
	gates := allGates(t)
	mgmt.StartWebhooks(t, gates)
	for _, tc := range badInputs() {
		t.Run(tc.name, func(t *testing.T) {
			f := newRunningCluster(t)
			cfg := tc.setup(f)
			r, rec := direct(mgmt.Client, clustercache.NewFakeClusterCache(workload.Client, client.ObjectKeyFromObject(f.cluster)), gates)
			if tc.reconciler != nil {
				r = tc.reconciler(f)
			}
			start := time.Now()
			res, err := reconcile(t, r, cfg)
			if err != nil {
				t.Fatalf("a bad input is a condition, not an error: %v", err)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("reconcile took %s", time.Since(start))
			}
			f.get(cfg)
			c := conditions.Get(cfg, tc.condition)
			if c == nil || c.Reason != tc.reason || c.Status == metav1.ConditionTrue || c.Message == "" {
				t.Fatalf("%s: got %+v, want reason %s", tc.condition, c, tc.reason)
			}
			if ready := conditions.Get(cfg, clusterv1.ReadyCondition); ready == nil || ready.Status == metav1.ConditionTrue {
				t.Errorf("Ready: %+v", ready)
			}
			if (res.RequeueAfter > 0) != tc.waits {
				t.Errorf("requeue after %s; the case waits for something unwatched: %v", res.RequeueAfter, tc.waits)
			}
			if ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) || cfg.Status.DataSecretName != "" {
				t.Errorf("status claims data: %+v", cfg.Status)
			}
			sec := &corev1.Secret{}
			err = mgmt.Client.Get(f.ctx, client.ObjectKeyFromObject(cfg), sec)
			switch {
			case tc.reason == bootstrapv1.KubeadmConfigDataSecretConflictReason:
				if err != nil || string(sec.Data["value"]) != "not ours" || len(sec.OwnerReferences) != 0 {
					t.Errorf("someone else's Secret was changed: %v %+v", err, sec)
				}
			case !apierrors.IsNotFound(err):
				t.Errorf("a data secret was written: %v", err)
			}
			for _, want := range tc.says {
				if !strings.Contains(c.Message, want) {
					t.Errorf("condition message does not name %q: %q", want, c.Message)
				}
			}
			if strings.Contains(c.Message, "\n") || len(c.Message) > 1024 {
				t.Errorf("condition message is not one short line: %q", c.Message)
			}
			t.Logf("%s %s: %s (events: %d)", c.Type, c.Reason, c.Message, len(rec.Events))

			if tc.fix != nil {
				tc.fix(f, cfg)
				if _, err := reconcile(t, r, cfg); err != nil {
					t.Fatal(err)
				}
				f.get(cfg)
				if !ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) {
					t.Fatalf("fixed input got no data: %s", dataAvailableReason(cfg))
				}
			}
		})
	}
}

// TestPausedConfigIsLeftAlone: a paused config gets the Paused condition and
// nothing else.
func TestPausedConfigIsLeftAlone(t *testing.T) {
	gates := allGates(t)
	mgmt.StartWebhooks(t, gates)
	f := newRunningCluster(t)
	m, _ := f.machine("w-"+rand.String(4), false, joinSpec(bootstrapv1.CloudConfig, false))
	cfg := &bootstrapv1.KubeadmConfig{}
	cfg.Name, cfg.Namespace = m.Name, f.ns
	f.get(cfg)
	before := cfg.DeepCopy()
	cfg.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	if err := mgmt.Client.Patch(f.ctx, cfg, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	r, _ := direct(mgmt.Client, clustercache.NewFakeClusterCache(workload.Client, client.ObjectKeyFromObject(f.cluster)), gates)
	if _, err := reconcile(t, r, cfg); err != nil {
		t.Fatal(err)
	}
	f.get(cfg)
	if c := conditions.Get(cfg, clusterv1.PausedCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Paused: %+v", c)
	}
	if ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) || len(tokensOf(t, cfg)) != 0 {
		t.Fatal("a paused config was bootstrapped")
	}
}
