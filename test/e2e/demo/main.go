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

// Command demo brings up the whole e2e stack on this machine and one workload
// cluster from a ClusterClass (a KubeadmControlPlane of CONTROL_PLANE_REPLICAS
// machines, 1 by default, and a MachineDeployment per bootstrap format), shows the Machines
// until all run, prints how to reach both clusters with kubectl, and keeps
// everything running until Ctrl-C. `make demo` runs it (as root).
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

func main() {
	host.RunIfHost()
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: the simulated hosts use mount, network and PID namespaces")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Stopped through make (its parent) as well as by Ctrl-C: a SIGTERM when
	// the parent goes, so the shutdown below still runs.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return fmt.Errorf("asking to be told when the parent exits: %w", err)
	}

	stateDir, err := os.MkdirTemp("", "cabpk-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	fmt.Printf("demo: logs and kubeconfigs in %s (removed on exit)\n", stateDir)
	began := time.Now()
	s, err := stack.Start(ctx, stack.Options{
		StateDir:    stateDir,
		ManagerArgs: []string{"--feature-gates=KubeadmBootstrapFormatIgnition=true,KubeadmBootstrapFormatRaw=true"},
		Progress:    os.Stdout,
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("demo: stopping hosts, controllers, manager and API server...")
		s.Stop()
		if left := s.Lab.Leftovers(); len(left) > 0 {
			fmt.Printf("demo: stopped, but these were left behind:\n  %s\n", strings.Join(left, "\n  "))
			return
		}
		fmt.Println("demo: stopped; no process, mount, cgroup, network interface or containerd root is left behind")
	}()

	// A quick-start user's cluster: a ClusterClass, then a Cluster of it
	// with a KubeadmControlPlane and one MachineDeployment per format.
	controlPlaneReplicas, err := replicasFromEnv("CONTROL_PLANE_REPLICAS", 1)
	if err != nil {
		return err
	}
	c := stack.Cluster{Namespace: "demo", Name: "demo"}
	objects := append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}}, c.ClusterClassObjects()...)
	for _, o := range objects {
		if err := s.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	if err := stack.WaitForClusterClass(ctx, s.Client, c.Namespace, c.Name); err != nil {
		return fmt.Errorf("ClusterClass %s/%s: %w", c.Namespace, c.Name, err)
	}
	var workers []stack.ClassWorkers
	for _, f := range bootstrapv1.Formats {
		workers = append(workers, stack.ClassWorkers{Name: string(f), Format: f, Replicas: 1})
	}
	if err := s.Client.Create(ctx, c.ClassCluster(controlPlaneReplicas, bootstrapv1.CloudConfig, workers...)); err != nil {
		return fmt.Errorf("creating the Cluster: %w", err)
	}
	fmt.Printf("%s  created cluster demo/demo from ClusterClass demo: a KubeadmControlPlane of %d cloud-config machine(s) and one MachineDeployment per format\n",
		time.Now().Format("15:04:05"), controlPlaneReplicas)

	want := int(controlPlaneReplicas) + len(workers)
	last, lastPrint := "", time.Time{}
	for {
		rows, err := stack.MachineTable(ctx, s.Client, c.Namespace)
		if err == nil {
			var b bytes.Buffer
			stack.WriteTable(&b, rows)
			done := stack.CountDone(rows)
			if b.String() != last || time.Since(lastPrint) > 15*time.Second {
				fmt.Printf("\n%s  machines running: %d/%d (%s)\n%s", time.Now().Format("15:04:05"), done, want, time.Since(began).Round(time.Second), b.String())
				last, lastPrint = b.String(), time.Now()
			}
			if done == want && len(rows) == want {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
	fmt.Printf("\nall %d machines are running, %s after start\n", want, time.Since(began).Round(time.Second))

	kubeconfig, err := stack.WorkloadKubeconfig(ctx, s.Client, c.Namespace, c.Name)
	if err != nil {
		return err
	}
	workload := filepath.Join(stateDir, "workload.kubeconfig")
	if err := os.WriteFile(workload, kubeconfig, 0o600); err != nil {
		return err
	}
	// The nodes turn Ready once the simulated cloud routed their pod
	// networks; CoreDNS and kube-proxy then run.
	lastStatus := ""
	for {
		status, err := stack.ReadWorkloadStatus(ctx, kubeconfig)
		if err == nil && status.String() != lastStatus {
			fmt.Printf("%s  workload cluster: %s\n", time.Now().Format("15:04:05"), status)
			lastStatus = status.String()
		}
		if err == nil && status.Done(want) {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
	fmt.Printf("\nevery node Ready and every pod Running, %s after start\n\n", time.Since(began).Round(time.Second))
	kubectl, err := testbin.Path(testbin.Kubectl)
	if err != nil {
		kubectl = "kubectl"
	}
	get := exec.CommandContext(ctx, kubectl, "--kubeconfig", workload, "get", "nodes,pods", "-A", "-o", "wide")
	get.Stdout, get.Stderr = os.Stdout, os.Stderr
	if err := get.Run(); err != nil {
		fmt.Printf("kubectl get nodes,pods -A: %v\n", err)
	}
	fmt.Printf(`
The workload cluster runs on simulated hosts: each is a node with containerd, runc and the real kubelet,
its control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) in containers from
kubeadm's static pod manifests, CoreDNS and kube-proxy from kubeadm's add-ons:

  %[1]s --kubeconfig %[2]s get nodes,pods -A -o wide

The management cluster (Cluster API objects, this provider's KubeadmConfigs):

  %[1]s --kubeconfig %[3]s get clusters,machines,kubeadmconfigs -A

Try scaling the raw MachineDeployment through the Cluster's topology, or moving it to another format:

  %[1]s --kubeconfig %[3]s -n demo patch cluster demo --type json \
    -p '[{"op":"replace","path":"/spec/topology/workers/machineDeployments/2/replicas","value":3}]'
  %[1]s --kubeconfig %[3]s -n demo patch cluster demo --type json \
    -p '[{"op":"replace","path":"/spec/topology/workers/machineDeployments/2/variables/overrides/0/value","value":"ignition"}]'

Logs: %[4]s (manager.log, cluster-api.log, hosts/<namespace>/<machine>/).
Ctrl-C stops everything.
`, kubectl, workload, s.Kubeconfig, stateDir)
	<-ctx.Done()
	return nil
}

// replicasFromEnv reads a replica count from the environment (make passes
// its variable of that name).
func replicasFromEnv(name string, def int32) (int32, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a replica count of at least 1", name, v)
	}
	return int32(n), nil
}
