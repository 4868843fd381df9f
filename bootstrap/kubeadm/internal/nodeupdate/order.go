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

// Package nodeupdate carries an in-place update to a machine that has
// joined: the NodeUpdate document of the desired spec's plan, run on the
// node by a short-lived Pod pinned there, and how it ended. The workload
// cluster holds all of an update's state (a Secret and a Pod named by the
// document's digest), so a restarted manager picks an update up where it
// was.
package nodeupdate

import (
	"encoding/json"
	"fmt"
	"slices"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/placeholders"
)

// Order is the NodeUpdate of a joined machine's plan (plan.Input.Joined),
// with its digest, and the document as the node reads it. binaries is
// where a node of another Kubernetes version gets the plan's; empty when
// the operator named none.
func Order(p *plan.Plan, binaries string) (*rawv1.NodeUpdate, []byte, error) {
	if p.Action == plan.ActionInit {
		return nil, nil, fmt.Errorf("an in-place update needs the plan of a joined machine, not of %q", p.Action)
	}
	u := &rawv1.NodeUpdate{
		APIVersion:        rawv1.GroupVersion,
		Kind:              rawv1.NodeUpdateKind,
		ControlPlane:      p.Action.IsControlPlane(),
		KubernetesVersion: "v" + p.KubernetesVersion.String(),
		Files:             []rawv1.UpdateFile{},
		PatchesDirectory:  p.Kubeadm.PatchesDirectory,
	}
	if binaries != "" {
		u.Binaries = &rawv1.KubernetesBinaries{URL: binaries}
	}
	for _, f := range p.Files {
		if f.Kind != plan.FileUser {
			// A joined plan has no other kind; an update never carries keys.
			return nil, nil, fmt.Errorf("%s: a %s file has no place in an in-place update", f.Source, f.Kind)
		}
		b, err := f.Bytes()
		if err != nil {
			return nil, nil, err
		}
		u.Files = append(u.Files, rawv1.UpdateFile{Path: f.Path, Owner: f.Owner, Permissions: f.Permissions, Content: b, Append: f.Append})
	}
	for _, a := range p.Kubeadm.KubeletExtraArgs {
		v := ""
		if a.Value != nil {
			v = *a.Value
		}
		found := placeholders.Find(v)
		u.KubeletExtraArgs = append(u.KubeletExtraArgs, rawv1.Arg{Name: a.Name, Value: v, Templated: len(found) > 0})
		for _, ph := range found {
			declared := rawv1.Placeholder{Text: ph.Text, Metadata: ph.Metadata}
			if ph.Supported() && !slices.Contains(u.Placeholders, declared) {
				u.Placeholders = append(u.Placeholders, declared)
			}
		}
	}
	var err error
	if u.Digest, err = u.ComputeDigest(); err != nil {
		return nil, nil, err
	}
	doc, err := json.Marshal(u)
	if err != nil {
		return nil, nil, err
	}
	return u, doc, nil
}
