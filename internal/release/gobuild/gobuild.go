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

// Package gobuild builds the static binaries that go into container images:
// a package of one of the repository's modules, or of a module it requires,
// built in that module's directory as the release builds its manager (cgo
// off, paths trimmed, symbols and build ID stripped), for a platform.
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Static builds pkg in the module whose directory is moduleDir for platform,
// with more linker flags (version stamps, say), and returns the binary.
func Static(moduleDir, pkg string, platform v1.Platform, ldflags ...string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "gobuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "binary")
	flags := strings.Join(append([]string{"-s", "-w", "-buildid="}, ldflags...), " ")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", flags, "-o", out, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture)
	if platform.Variant != "" && platform.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(platform.Variant, "v"))
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return os.ReadFile(out)
}
