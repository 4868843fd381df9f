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

package capi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// hostLogCollector copies a simulated host's logs (the host's own, its
// format's consumer's, kubeadm's, the kubelet's and containerd's) into a
// spec's artifacts, as Cluster API's Docker collector copies a kind node's
// journal. It implements the framework's ClusterLogCollector. It reads the
// Lab's state directory, so that every process of a parallel run can use it.
type hostLogCollector struct {
	labDir string
}

// CollectMachineLog copies the logs of the Machine's host.
func (c hostLogCollector) CollectMachineLog(_ context.Context, _ client.Client, m *clusterv1.Machine, outputPath string) error {
	if m.Spec.InfrastructureRef.Kind != "SimulatedMachine" {
		return nil
	}
	return c.copyHost(hostKey(*m), outputPath)
}

// hostKey is the Lab's name of a SimulatedMachine's host.
func hostKey(m clusterv1.Machine) string { return m.Namespace + "/" + m.Spec.InfrastructureRef.Name }

// CollectMachinePoolLog copies the logs of every instance of the pool.
func (c hostLogCollector) CollectMachinePoolLog(ctx context.Context, cl client.Client, mp *clusterv1.MachinePool, outputPath string) error {
	ref := mp.Spec.Template.Spec.InfrastructureRef
	if ref.Kind != "SimulatedMachinePool" {
		return nil
	}
	pool := &infrav1.SimulatedMachinePool{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: mp.Namespace, Name: ref.Name}, pool); err != nil {
		return err
	}
	var errs []error
	for _, in := range pool.Status.Instances {
		errs = append(errs, c.copyHost(mp.Namespace+"/"+in.Name, filepath.Join(outputPath, in.Name)))
	}
	return errors.Join(errs...)
}

// CollectInfrastructureLogs has nothing to copy: the simulated cloud keeps
// no logs of its own beside the hosts'.
func (hostLogCollector) CollectInfrastructureLogs(context.Context, client.Client, *clusterv1.Cluster, string) error {
	return nil
}

func (c hostLogCollector) copyHost(key, outputPath string) error {
	logs, err := filepath.Glob(filepath.Join(host.Dir(c.labDir, key), "*.log"))
	if err != nil {
		return err
	}
	if len(logs) == 0 {
		return fmt.Errorf("no logs of host %s", key)
	}
	if err := os.MkdirAll(outputPath, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, l := range logs {
		errs = append(errs, copyLog(l, outputPath))
	}
	return errors.Join(errs...)
}

// copyLog copies one log into dir; the logs are small enough to read whole.
func copyLog(path, dir string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, filepath.Base(path)), data, 0o644)
}
