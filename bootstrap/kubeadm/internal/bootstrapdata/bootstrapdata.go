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

// Package bootstrapdata turns a bootstrap plan into the bootstrap data of its
// format: the keys of the data secret Cluster API hands to the machine.
package bootstrapdata

import (
	"fmt"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/cloudinit"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/ignition"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/plan"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/raw"
)

const (
	// ValueKey holds the bootstrap data (the Cluster API contract key).
	ValueKey = "value"
	// FormatKey names the format of ValueKey (the Cluster API contract key).
	FormatKey = "format"
)

// Data is the rendered bootstrap data.
type Data struct {
	Format bootstrapv1.Format
	Value  []byte
	// Extra holds format-specific further keys (raw: "files").
	Extra map[string][]byte
}

// SecretData returns the data secret's keys.
func (d *Data) SecretData() map[string][]byte {
	out := map[string][]byte{ValueKey: d.Value, FormatKey: []byte(d.Format)}
	for k, v := range d.Extra {
		out[k] = v
	}
	return out
}

// Render renders p in its format.
func Render(p *plan.Plan) (*Data, error) {
	d := &Data{Format: p.Format}
	var err error
	switch p.Format {
	case bootstrapv1.CloudConfig:
		d.Value, err = cloudinit.Render(p)
	case bootstrapv1.Ignition:
		d.Value, err = ignition.Render(p)
	case bootstrapv1.Raw:
		var out *raw.Output
		if out, err = raw.Render(p); err == nil {
			d.Value = out.Value
			if out.Files != nil {
				d.Extra = map[string][]byte{raw.FilesKey: out.Files}
			}
		}
	default:
		err = fmt.Errorf("unknown format %q", p.Format)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}
