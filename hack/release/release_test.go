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

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/test/testenv"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

const testTag = "v0.1.0"

var testRef = name.MustParseReference("example.com/cabpk/" + ImageName + ":" + testTag).(name.Tag)

// release runs the whole release for this machine's platform into a
// directory, once per test binary.
func release(t *testing.T) string {
	t.Helper()
	releaseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "release-test-")
		if err != nil {
			releaseErr = err
			return
		}
		releaseDir = dir
		releaseErr = run(options{out: dir, registry: "example.com/cabpk", tag: testTag, platforms: "linux/" + goruntime.GOARCH})
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseDir
}

var (
	releaseOnce sync.Once
	releaseDir  string
	releaseErr  error
)

// layerFiles reads every file of an image's layers.
func layerFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = hdr
			if hdr.Name == "manager" || hdr.Name == "node-updater" {
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				checkStaticELF(t, hdr.Name, data)
			}
		}
		rc.Close()
	}
	return files
}

func checkStaticELF(t *testing.T, name string, data []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("/%s is not an ELF binary: %v", name, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("/%s is dynamically linked (it has an interpreter)", name)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("/%s needs shared libraries: %v", name, libs)
	}
}

// TestImage reads the image tarball back the way a registry client would:
// the tag docker load and kind take, one layer on nothing, the entrypoint,
// a non-root user, a static binary, the platform.
func TestImage(t *testing.T) {
	dir := release(t)
	path := filepath.Join(dir, ImageTarball(goruntime.GOARCH))
	img, err := tarball.ImageFromPath(path, &testRef)
	if err != nil {
		t.Fatalf("the tarball does not hold %s: %v", testRef, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != goruntime.GOARCH {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/manager" {
		t.Errorf("entrypoint %v", cfg.Config.Entrypoint)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q: want the non-root 65532", cfg.Config.User)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != testTag {
		t.Errorf("labels %v", cfg.Config.Labels)
	}
	layers, _ := img.Layers()
	if len(layers) != 1 {
		t.Errorf("%d layers: want one on an empty base", len(layers))
	}
	files := layerFiles(t, img)
	for _, binary := range []string{"manager", strings.TrimPrefix(rawv1.NodeUpdaterCommand, "/")} {
		if m := files[binary]; m == nil || m.Mode&0o111 == 0 {
			t.Errorf("/%s missing or not executable: %+v", binary, m)
		}
	}
	if files["etc/passwd"] == nil || files["etc/group"] == nil {
		t.Error("no passwd/group entry for the non-root user")
	}

	// The same binary makes the same image.
	again := filepath.Join(t.TempDir(), "again.tar")
	if err := WriteImage(again, testRef, v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}); err != nil {
		t.Fatal(err)
	}
	img2, err := tarball.ImageFromPath(again, &testRef)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("two builds of one commit give two digests: %s, %s", d1, d2)
	}
}

// TestImageLoads loads the tarball with podman, whose `load` takes what
// `docker load` takes, into a throwaway store, and reads back the tag and the
// config it stored.
func TestImageLoads(t *testing.T) {
	dir := release(t)
	store := t.TempDir()
	podman := func(args ...string) []byte {
		t.Helper()
		base := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}
		out, err := exec.Command(testbin.MustPath(t, testbin.Podman), append(base, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	out := podman("load", "--input", filepath.Join(dir, ImageTarball(goruntime.GOARCH)))
	if !strings.Contains(string(out), "Loaded image: "+testRef.String()) {
		t.Fatalf("podman load did not report %s:\n%s", testRef, out)
	}
	var inspected []struct {
		Architecture, Os, User string
		Config                 struct{ Entrypoint []string }
	}
	if err := json.Unmarshal(podman("image", "inspect", testRef.String()), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("podman image inspect: %v %+v", err, inspected)
	}
	got := inspected[0]
	if got.Architecture != goruntime.GOARCH || got.Os != "linux" || got.User != "65532:65532" || len(got.Config.Entrypoint) != 1 || got.Config.Entrypoint[0] != "/manager" {
		t.Errorf("loaded image: %+v", got)
	}
}

func TestChecksums(t *testing.T) {
	dir := release(t)
	cmd := exec.Command("sha256sum", "--check", "checksums.txt")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum --check: %v\n%s", err, out)
	}
	sums, _ := os.ReadFile(filepath.Join(dir, "checksums.txt"))
	for _, want := range []string{"bootstrap-components.yaml", "metadata.yaml", ImageTarball(goruntime.GOARCH)} {
		if !strings.Contains(string(sums), want) {
			t.Errorf("checksums.txt lacks %s", want)
		}
	}
}

// clusterctlGenerate runs clusterctl v1.14.2 on the release as a local
// provider repository, with env as the clusterctl variables.
func clusterctlGenerate(t *testing.T, dir string, env map[string]string) (string, error) {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "bootstrap-kubeadm", testTag)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"bootstrap-components.yaml", "metadata.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(t.TempDir(), "clusterctl.yaml")
	body := "providers:\n- name: kubeadm\n  type: BootstrapProvider\n  url: file://" + filepath.Join(repo, "bootstrap-components.yaml") + "\n"
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.MustPath(t, testbin.Clusterctl), "generate", "provider", "--bootstrap", "kubeadm:"+testTag, "--config", config)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stderr.String(), err
	}
	return stdout.String(), nil
}

func objects(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	args, _, _ := unstructured.NestedStringSlice(managerContainer(t, objs), "args")
	return args
}

func managerContainer(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if cm := c.(map[string]any); cm["name"] == "manager" {
				return cm
			}
		}
	}
	t.Fatal("no manager container")
	return nil
}

// checkManagerHardening checks the manager container's read-only root file
// system, its memory request and limit (memoryLimit), and the Go runtime's
// memory limit taken from it.
func checkManagerHardening(t *testing.T, objs []*unstructured.Unstructured, memoryLimit string) {
	t.Helper()
	c := managerContainer(t, objs)
	if ro, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem"); !ro {
		t.Error("the manager's root file system is not read-only")
	}
	limit, _, _ := unstructured.NestedString(c, "resources", "limits", "memory")
	request, _, _ := unstructured.NestedString(c, "resources", "requests", "memory")
	requestQ, errRequest := resource.ParseQuantity(request)
	limitQ, errLimit := resource.ParseQuantity(limit)
	if limit != memoryLimit || errRequest != nil || errLimit != nil || requestQ.Cmp(limitQ) > 0 {
		t.Errorf("manager memory request %q, limit %q: want a request within the limit %s", request, limit, memoryLimit)
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	fromLimit := false
	for _, e := range env {
		em := e.(map[string]any)
		res, _, _ := unstructured.NestedString(em, "valueFrom", "resourceFieldRef", "resource")
		fromLimit = fromLimit || (em["name"] == "GOMEMLIMIT" && res == "limits.memory")
	}
	if !fromLimit {
		t.Error("GOMEMLIMIT is not taken from the container's memory limit")
	}
}

// certManagerCRDs stand in for cert-manager, which clusterctl installs
// before any provider: the components' Certificate and Issuer need their kinds.
func certManagerCRDs(t *testing.T) []*unstructured.Unstructured {
	crd := func(kind, plural string) *unstructured.Unstructured {
		preserve := true
		return toUnstructured(t, &apiextensionsv1.CustomResourceDefinition{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".cert-manager.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "cert-manager.io", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
			},
		})
	}
	return []*unstructured.Unstructured{crd("Certificate", "certificates"), crd("Issuer", "issuers")}
}

func toUnstructured(t *testing.T, o any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestClusterctlAcceptsTheRelease: clusterctl v1.14.2 generates the
// provider from the release with the variables unset and set, substitutes
// every one, and the result applies to a real API server; a variable with an
// invalid value stops the manager (the binary from the image) at start,
// naming it.
func TestClusterctlAcceptsTheRelease(t *testing.T) {
	dir := release(t)
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	applyAll(ctx, t, env, certManagerCRDs(t))
	for name, tc := range map[string]struct {
		vars        map[string]string
		want        []string
		memoryLimit string
	}{
		"defaults": {nil, []string{"KubeadmBootstrapFormatIgnition=false", "KubeadmBootstrapFormatRaw=false", "MachinePool=true", "--bootstrap-token-ttl=15m", "--bootstrap-data-size-limit=0", "--node-update-kubernetes-binaries=none"}, "512Mi"},
		"set": {map[string]string{"EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION": "true", "EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW": "true", "EXP_MACHINE_POOL": "false", "KUBEADM_BOOTSTRAP_TOKEN_TTL": "30m", "KUBEADM_BOOTSTRAP_DATA_SIZE_LIMIT": "16384", "KUBEADM_BOOTSTRAP_MEMORY_LIMIT": "1Gi",
			"KUBEADM_NODE_UPDATE_KUBERNETES_BINARIES": "https://dl.k8s.io/release"},
			[]string{"KubeadmBootstrapFormatIgnition=true", "KubeadmBootstrapFormatRaw=true", "MachinePool=false", "--bootstrap-token-ttl=30m", "--bootstrap-data-size-limit=16384",
				"--node-update-kubernetes-binaries=https://dl.k8s.io/release"}, "1Gi"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := clusterctlGenerate(t, dir, tc.vars)
			if err != nil {
				t.Fatalf("clusterctl generate provider: %v\n%s", err, out)
			}
			if strings.Contains(out, "${") {
				t.Fatal("a variable was left unsubstituted")
			}
			objs := objects(t, out)
			args := strings.Join(managerArgs(t, objs), " ")
			for _, w := range tc.want {
				if !strings.Contains(args, w) {
					t.Errorf("manager args lack %s: %s", w, args)
				}
			}
			if !strings.Contains(out, "image: "+testRef.String()) {
				t.Error("the components do not run the released image")
			}
			checkManagerHardening(t, objs, tc.memoryLimit)
			applyAll(ctx, t, env, objs)
		})
	}

	out, err := clusterctlGenerate(t, dir, map[string]string{"EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW": "yes"})
	if err != nil {
		t.Fatalf("clusterctl generate provider: %v\n%s", err, out)
	}
	manager := extractManager(t, dir)
	cmd := exec.Command(manager, append(managerArgs(t, objects(t, out)), "--kubeconfig=/nonexistent")...)
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "KubeadmBootstrapFormatRaw") || !strings.Contains(string(msg), "yes") {
		t.Fatalf("the manager must refuse EXP_KUBEADM_BOOTSTRAP_FORMAT_RAW=yes at start, naming it; got %v:\n%s", err, msg)
	}
}

// applyAll applies the objects with server-side apply: cluster-scoped and
// namespaces first, then CRDs are waited for, then the rest.
func applyAll(ctx context.Context, t *testing.T, env *testenv.Environment, objs []*unstructured.Unstructured) {
	t.Helper()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition"
	}
	apply := func(u *unstructured.Unstructured) error {
		u = u.DeepCopy()
		u.SetManagedFields(nil)
		return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership, client.FieldOwner("release-test"))
	}
	for _, pass := range []func(*unstructured.Unstructured) bool{first, func(u *unstructured.Unstructured) bool { return !first(u) }} {
		for _, u := range objs {
			if !pass(u) {
				continue
			}
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				if err := apply(u); err != nil {
					t.Logf("applying %s %s: %v (retrying)", u.GetKind(), u.GetName(), err)
					return false, nil
				}
				return true, nil
			})
			if err != nil {
				t.Fatalf("%s %s does not apply", u.GetKind(), u.GetName())
			}
		}
	}
}

// extractManager writes the image's /manager to a file and returns its path.
func extractManager(t *testing.T, dir string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(filepath.Join(dir, ImageTarball(goruntime.GOARCH)), &testRef)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatal("no /manager in the image")
		}
		if hdr.Name == "manager" {
			path := filepath.Join(t.TempDir(), "manager")
			data, _ := io.ReadAll(tr)
			if err := os.WriteFile(path, data, 0o755); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
}

// TestComponentsRunTheNodeUpdaterOfTheRelease: the manager of the
// components runs in-place updates with its own image, which holds the
// node updater.
func TestComponentsRunTheNodeUpdaterOfTheRelease(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(release(t), "bootstrap-components.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var deployment *unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err == nil && u.GetKind() == "Deployment" {
			deployment = u
		}
	}
	if deployment == nil {
		t.Fatal("no Deployment in the components")
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	manager := containers[0].(map[string]any)
	var value string
	for _, e := range manager["env"].([]any) {
		if env := e.(map[string]any); env["name"] == "NODE_UPDATE_IMAGE" {
			value, _ = env["value"].(string)
		}
	}
	if value != testRef.String() || manager["image"] != testRef.String() {
		t.Errorf("NODE_UPDATE_IMAGE is %q, the manager's image %v; want both %s", value, manager["image"], testRef)
	}
	if !slices.Contains(manager["args"].([]any), any("--node-update-image=$(NODE_UPDATE_IMAGE)")) {
		t.Errorf("the manager's args do not pass NODE_UPDATE_IMAGE: %v", manager["args"])
	}
}
