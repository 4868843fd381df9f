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

// Package docs_test keeps the documentation true to the tree: its links
// resolve, the layout it describes covers every package, its Go
// snippets compile and its object examples decode.
package docs_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/feature"
)

// repoRoot is the repository, this file's parent.
const repoRoot = ".."

// markdownFiles are the documentation pages: the README, CONTRIBUTING, the
// CHANGELOG, SECURITY and everything under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md", "SECURITY.md"}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, filepath.Join("docs", p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#+ (.+)$`)
	fence   = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```")
)

// anchor is a heading's fragment as GitHub makes it.
func anchor(title string) string {
	title = strings.ToLower(strings.TrimSpace(title))
	var b strings.Builder
	for _, r := range title {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestLinksResolve: every relative link of every page names a file that
// exists and, with a fragment, a heading of that page.
func TestLinksResolve(t *testing.T) {
	for _, page := range markdownFiles(t) {
		text := fence.ReplaceAllString(read(t, page), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), path)
				if _, err := os.Stat(filepath.Join(repoRoot, file)); err != nil {
					t.Errorf("%s: link %s: %v", page, target, err)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			var anchors []string
			for _, h := range heading.FindAllStringSubmatch(fence.ReplaceAllString(read(t, file), ""), -1) {
				anchors = append(anchors, anchor(h[1]))
			}
			if !slices.Contains(anchors, frag) {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, file, frag)
			}
		}
	}
}

// layoutRow is a first cell of the layout table: `a/b`, `a/{b,c}`,
// several of them separated by commas.
var layoutPath = regexp.MustCompile("`([^`]+)`")

// TestLayoutCoversEveryPackage: the developer guide's layout table names
// every Go module of the repository and every package of each (itself or a
// folder above it), and every path it names exists.
func TestLayoutCoversEveryPackage(t *testing.T) {
	var listed []string
	for _, line := range strings.Split(read(t, "docs/developer/layout.md"), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range layoutPath.FindAllStringSubmatch(first, -1) {
			for _, p := range expand(m[1]) {
				p = strings.TrimSuffix(p, "/")
				if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
					t.Errorf("the layout names %s: %v", p, err)
				}
				listed = append(listed, p)
			}
		}
	}
	for _, module := range goModules(t) {
		if !slices.Contains(listed, filepath.ToSlash(filepath.Join(module, "go.mod"))) {
			t.Errorf("the layout has no row for the module %s/go.mod", module)
		}
		for _, dir := range packageDirs(t, module) {
			switch {
			case dir == "docs":
			case strings.HasPrefix(dir, "test/"):
				// The test tree is where a contributor looks for a home for a
				// test: each of its packages says what it is for.
				if !slices.Contains(listed, dir) {
					t.Errorf("the layout has no row of its own for %s", dir)
				}
			case !slices.ContainsFunc(listed, func(p string) bool { return dir == p || strings.HasPrefix(dir, p+"/") }):
				t.Errorf("the layout does not name %s", dir)
			}
		}
	}
}

// modulePath is the product module's path; the repository's other modules
// (tests, tools, release builders) lie under it.
const modulePath = "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm"

// goModules are the directories, relative to the repository root, of the
// repository's Go modules whose paths lie under the product's: each has its
// packages in the layout.
func goModules(t *testing.T) []string {
	t.Helper()
	var modules []string
	err := filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "go.mod" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if path := modfile.ModulePath(b); path == modulePath || strings.HasPrefix(path, modulePath+"/") {
			rel, err := filepath.Rel(repoRoot, filepath.Dir(p))
			if err != nil {
				return err
			}
			modules = append(modules, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return modules
}

// packageDirs lists the package directories of the module in dir, relative
// to the repository root.
func packageDirs(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath", "./...")
	cmd.Dir = filepath.Join(repoRoot, dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", dir, err)
	}
	var dirs []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var pkg struct{ ImportPath string }
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, strings.TrimPrefix(pkg.ImportPath, modulePath+"/"))
	}
	return dirs
}

// expand turns a/{b,c}/d into a/b/d and a/c/d.
func expand(p string) []string {
	open := strings.Index(p, "{")
	if open < 0 {
		return []string{p}
	}
	end := strings.Index(p[open:], "}") + open
	var out []string
	for _, alt := range strings.Split(p[open+1:end], ",") {
		out = append(out, expand(p[:open]+alt+p[end+1:])...)
	}
	return out
}

// TestGoSnippetsCompile: every Go block of the documentation is a whole
// file that builds against this module, laid over the tree in a package of
// its own.
func TestGoSnippetsCompile(t *testing.T) {
	overlay := map[string]string{}
	var pkgs []string
	dir := t.TempDir()
	for _, page := range markdownFiles(t) {
		for i, m := range fence.FindAllStringSubmatch(read(t, page), -1) {
			if m[1] != "go" {
				continue
			}
			name := strings.NewReplacer("/", "_", ".", "_").Replace(page) + "_" + string(rune('a'+i))
			src := filepath.Join(dir, name+".go")
			if err := os.WriteFile(src, []byte(m[2]), 0o600); err != nil {
				t.Fatal(err)
			}
			abs, err := filepath.Abs(filepath.Join(repoRoot, "docs", "snippets", name, "main.go"))
			if err != nil {
				t.Fatal(err)
			}
			overlay[abs] = src
			pkgs = append(pkgs, "./docs/snippets/"+name)
		}
	}
	if len(pkgs) == 0 {
		return
	}
	b, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"build", "-o", os.DevNull, "-overlay", overlayFile}, pkgs...)...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("Go snippets of the documentation do not build: %v\n%s", err, out)
	}
}

var gateRow = regexp.MustCompile("(?m)^\\| `(\\w+)` \\| `(\\w+)` \\| (true|false) \\| (alpha|beta|GA) \\|")

// TestFeatureGatesTable: the operator guide's gates table lists every gate
// the manager knows, with its clusterctl variable, default and stage, and
// nothing else.
func TestFeatureGatesTable(t *testing.T) {
	documented := map[string]string{}
	for _, m := range gateRow.FindAllStringSubmatch(read(t, "docs/operator/feature-gates.md"), -1) {
		documented[m[1]] = strings.Join(m[2:], " ")
	}
	known := map[string]string{}
	for name, spec := range feature.NewFeatureGates().GetAll() {
		if name == "AllAlpha" || name == "AllBeta" {
			continue
		}
		known[string(name)] = fmt.Sprintf("%s %t %s", feature.EnvVar(name), spec.Default, strings.ToLower(string(spec.PreRelease)))
	}
	if !maps.Equal(documented, known) {
		t.Errorf("docs/operator/feature-gates.md lists\n  %v\nthe manager knows\n  %v", documented, known)
	}
}

// TestShellSnippetsRun: every `sh` block of the documentation runs from the
// repository's root and succeeds. Blocks that need a machine or a cluster
// (make demo, clusterctl) are plain blocks, which no test runs.
func TestShellSnippetsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run for every sh block")
	}
	for _, page := range markdownFiles(t) {
		for i, m := range fence.FindAllStringSubmatch(read(t, page), -1) {
			if m[1] != "sh" {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", page, i), func(t *testing.T) {
				cmd := exec.Command("bash", "-euo", "pipefail", "-c", m[2])
				cmd.Dir = repoRoot
				cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%v\n%s", err, out)
				}
			})
		}
	}
}

// TestRBACTable: the reference's RBAC table lists the generated ClusterRole's
// rules, in order, with their API groups, resources and verbs.
func TestRBACTable(t *testing.T) {
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(read(t, "bootstrap/kubeadm/config/rbac/role.yaml")), &role); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range role.Rules {
		want = append(want, rbacRow(r.APIGroups, r.Resources, r.Verbs))
	}
	_, section, _ := strings.Cut(read(t, "docs/reference/controller.md"), "## RBAC\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var got []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		var groups, resources []string
		for _, m := range layoutPath.FindAllStringSubmatch(cells[1], -1) {
			groups = append(groups, strings.Trim(m[1], `"`))
		}
		for _, m := range layoutPath.FindAllStringSubmatch(cells[2], -1) {
			resources = append(resources, m[1])
		}
		got = append(got, rbacRow(groups, resources, strings.Split(strings.TrimSpace(cells[3]), ", ")))
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/reference/controller.md's RBAC table:\n  %s\nrole.yaml:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func rbacRow(groups, resources, verbs []string) string {
	return fmt.Sprintf("%q %v %v", groups, resources, verbs)
}
