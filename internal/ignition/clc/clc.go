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

// Package clc translates Container Linux Configs (upstream Cluster API's
// spec.ignition.containerLinuxConfig) into Ignition v3 configs, so configs
// written for upstream's Ignition 2 output merge into this provider's
// Ignition 3.4 output. It chains Flatcar's CLC transpiler (CLC to Ignition
// 2.3, as upstream does), CoreOS's ign-converter (2.3 to 3.0) and Ignition's
// own parser (3.0 up to 3.4).
package clc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/ign-converter/translate/v23tov30"
	ignv2 "github.com/coreos/ignition/config/v2_3"
	ignconfig "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	clct "github.com/flatcar/container-linux-config-transpiler/config"
	clctypes "github.com/flatcar/container-linux-config-transpiler/config/types"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlerrors"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/yamlsize"
)

// unsupported refuses what a CLC can say but Ignition 3 merged into this
// provider's output cannot, naming the field and the reason instead of
// writing it somewhere else or failing deep in the converter.
func unsupported(cfg clctypes.Config) error {
	var problems []string
	onOther := func(kind string, i int, fs string) {
		if fs != "" && fs != rootFilesystem {
			problems = append(problems, fmt.Sprintf("storage.%s[%d].filesystem: only the root filesystem is supported; "+
				"Ignition 3 places %s by path (Flatcar mounts the OEM partition at /oem)", kind, i, kind))
		}
	}
	for i, f := range cfg.Storage.Files {
		onOther("files", i, f.Filesystem)
	}
	for i, d := range cfg.Storage.Directories {
		onOther("directories", i, d.Filesystem)
	}
	for i, l := range cfg.Storage.Links {
		onOther("links", i, l.Filesystem)
	}
	for i := range cfg.Storage.Filesystems {
		problems = append(problems, fmt.Sprintf("storage.filesystems[%d]: declaring filesystems (data disks, swap) is not supported "+
			"in a Container Linux Config here: Ignition 3 needs a mount point for each; use spec.diskSetup and spec.mounts, or Butane", i))
	}
	if len(cfg.Networkd.Units) > 0 {
		problems = append(problems, "networkd.units: not supported by Ignition 3; write the units as files under /etc/systemd/network")
	}
	if len(problems) > 0 {
		return fmt.Errorf("not supported: %s", strings.Join(problems, "; "))
	}
	return nil
}

// rootFilesystem is the name Ignition 2 gives the root filesystem; files in a
// CLC live there unless they name another filesystem.
const rootFilesystem = "root"

// Translate converts a CLC document to Ignition 3.4. With strict, any parse
// or conversion warning is an error, as upstream does; otherwise warnings are
// returned. Neither quotes the document's values (see internal/yamlerrors).
// A document that expands through aliases to more than
// yamlsize.ExtraIgnitionConfig bytes is refused before anything decodes it.
func Translate(doc string, strict bool) (types.Config, []string, error) {
	cfg, warnings, err := translate(doc, strict)
	return cfg, warnings, yamlerrors.RedactError(err)
}

func translate(doc string, strict bool) (types.Config, []string, error) {
	// Bounded before the transpiler's YAML parser expands its aliases.
	var tooLarge *yamlsize.TooLargeError
	if err := yamlsize.Check([]byte(doc), yamlsize.ExtraIgnitionConfig); errors.As(err, &tooLarge) {
		return types.Config{}, nil, err
	} else if err != nil {
		return types.Config{}, nil, fmt.Errorf("not a valid Container Linux Config: %w", err)
	}
	cfg, ast, parseReport := clct.Parse([]byte(doc))
	if parseReport.IsFatal() || (strict && len(parseReport.Entries) > 0) {
		return types.Config{}, nil, fmt.Errorf("not a valid Container Linux Config: %s", parseReport.String())
	}
	if err := unsupported(cfg); err != nil {
		return types.Config{}, nil, err
	}
	ign2, convertReport := clct.Convert(cfg, "", ast)
	if convertReport.IsFatal() || (strict && len(convertReport.Entries) > 0) {
		return types.Config{}, nil, fmt.Errorf("converting to Ignition failed: %s", convertReport.String())
	}

	// The transpiler emits Flatcar's fork of the 2.3 types; re-read the same
	// JSON with the 2.3 types the converter takes.
	raw2, err := json.Marshal(ign2)
	if err != nil {
		return types.Config{}, nil, err
	}
	old, report2, err := ignv2.Parse(raw2)
	if err != nil {
		return types.Config{}, nil, fmt.Errorf("the Ignition 2.3 config does not parse: %v: %s", err, report2.String())
	}
	fsMap := map[string]string{rootFilesystem: "/"}
	ign3, err := v23tov30.Translate(old, fsMap)
	if err != nil {
		// Ignition 2 only warned about some things Ignition 3 refuses (a
		// partition label with ':', which sgdisk truncated): say which.
		return types.Config{}, nil, fmt.Errorf("cannot be expressed as Ignition 3, which current Flatcar reads: %w", err)
	}
	raw3, err := json.Marshal(ign3)
	if err != nil {
		return types.Config{}, nil, err
	}
	out, report3, err := ignconfig.ParseCompatibleVersion(raw3)
	if err != nil {
		return types.Config{}, nil, fmt.Errorf("the Ignition 3 config does not parse: %v: %s", err, report3.String())
	}
	var warnings []string
	for _, r := range []string{parseReport.String(), convertReport.String()} {
		if r = strings.TrimSpace(r); r != "" {
			warnings = append(warnings, yamlerrors.Redact(r))
		}
	}
	return out, warnings, nil
}
