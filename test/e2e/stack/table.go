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

package stack

import (
	"context"
	"fmt"
	"io"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// MachineRow is one Machine as the progress table shows it.
type MachineRow struct {
	Machine string
	Format  bootstrapv1.Format
	// Phase is the Machine's phase; Host how far its host got; Node the
	// Machine's nodeRef.
	Phase, Host, Node string
	// Waiting is why the Machine has no bootstrap data yet.
	Waiting string
	// Consumer is the program that ran the data on the host.
	Consumer string
	// ProviderID is the Machine's.
	ProviderID string
}

// Done is true once the Machine runs with a Node and its host finished
// running the bootstrap data.
func (r MachineRow) Done() bool {
	return r.Phase == string(clusterv1.MachinePhaseRunning) && r.Node != "" && r.Host == string(infrav1.HostBootstrapped)
}

// CountDone counts the rows that are Done.
func CountDone(rows []MachineRow) int {
	n := 0
	for _, r := range rows {
		if r.Done() {
			n++
		}
	}
	return n
}

// MachineTable reads the Machines of a namespace with their bootstrap
// configs and hosts, sorted by name.
func MachineTable(ctx context.Context, c client.Client, namespace string) ([]MachineRow, error) {
	var machines clusterv1.MachineList
	if err := c.List(ctx, &machines, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	rows := make([]MachineRow, 0, len(machines.Items))
	for _, m := range machines.Items {
		r := MachineRow{Machine: m.Name, Phase: m.Status.Phase, ProviderID: m.Spec.ProviderID}
		if m.Status.NodeRef.IsDefined() {
			r.Node = m.Status.NodeRef.Name
		}
		cfg := &bootstrapv1.KubeadmConfig{}
		if c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, cfg) == nil {
			// What it renders: the spec's format, or the one its
			// annotation chooses (KubeadmControlPlane's machines).
			r.Format = cfg.Spec.EffectiveFormat()
			if resolved, errs := fieldrules.Resolve(cfg.Annotations, &cfg.Spec, field.NewPath("metadata", "annotations")); len(errs) == 0 {
				r.Format = resolved.EffectiveFormat()
			}
			for _, cond := range cfg.Status.Conditions {
				if cond.Type == "DataSecretAvailable" && cond.Status != metav1.ConditionTrue {
					r.Waiting = cond.Reason
				}
			}
		}
		sm := &infrav1.SimulatedMachine{}
		if c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Spec.InfrastructureRef.Name}, sm) == nil {
			r.Host, r.Consumer = string(sm.Status.HostPhase), sm.Status.Consumer
			if sm.Status.HostPhase == infrav1.HostFailed {
				r.Waiting = sm.Status.HostMessage
			}
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Machine < rows[j].Machine })
	return rows, nil
}

// WriteTable prints rows as an aligned table.
func WriteTable(w io.Writer, rows []MachineRow) {
	fmt.Fprintf(w, "  %-36s %-13s %-13s %-13s %-36s %s\n", "MACHINE", "FORMAT", "PHASE", "HOST", "NODE", "WAITING FOR")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-36s %-13s %-13s %-13s %-36s %s\n", r.Machine, r.Format, r.Phase, r.Host, r.Node, r.Waiting)
	}
}
