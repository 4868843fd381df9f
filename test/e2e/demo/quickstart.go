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
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/capi/flavors"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/stack"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// Names of the quick start's files (in the demo's directory) and cluster.
const (
	clusterctlConfig   = "clusterctl.yaml"
	clusterName        = "demo"
	clusterNamespace   = "default"
	clusterManifest    = "demo.yaml"
	workloadKubeconfig = "demo.kubeconfig"
)

// quickStart runs Cluster API's quick start against the management cluster
// with clusterctl and kubectl, printing each command as a user types it in
// the demo's directory.
type quickStart struct {
	dir, kubeconfig     string
	clusterctl, kubectl string
	set                 settings
	// client reads the management cluster's Machines for the table that
	// decides when to show clusterctl describe again.
	client client.Client
}

func newQuickStart(dir, kubeconfig string, rel *releases.Releases, cloudURL string, set settings) (*quickStart, error) {
	cfg, err := rel.Config(cloudURL)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, clusterctlConfig), cfg, 0o600); err != nil {
		return nil, err
	}
	q := &quickStart{dir: dir, kubeconfig: kubeconfig, set: set}
	if q.clusterctl, err = testbin.Path(testbin.Clusterctl); err != nil {
		return nil, err
	}
	if q.kubectl, err = testbin.Path(testbin.Kubectl); err != nil {
		return nil, err
	}
	q.client, err = managementClient(kubeconfig)
	return q, err
}

func managementClient(kubeconfig string) (client.Client, error) {
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, bootstrapv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return client.New(restConfig, client.Options{Scheme: scheme})
}

// run is the quick start: init, generate, apply, watch, get the kubeconfig,
// look at the nodes and pods. It returns early on Ctrl-C.
func (q *quickStart) run(ctx context.Context, p *progress) error {
	fmt.Printf(`
To follow along in a second terminal (as root):

  cd %s
  export KUBECONFIG=$PWD/management.kubeconfig PATH=%s:%s:$PATH

`, q.dir, filepath.Dir(q.clusterctl), filepath.Dir(q.kubectl))
	p.sayf("installing cert-manager, Cluster API, KubeadmControlPlane, this provider and the simulated provider")
	if err := q.command(ctx, nil, nil, "clusterctl", "init", "--config", clusterctlConfig,
		"--infrastructure", "simulated", "--bootstrap", "kubeadm:"+releases.OurVersion, "--wait-providers"); err != nil {
		return err
	}
	p.sayf("every provider is Available")

	replicas := strconv.Itoa(q.set.controlPlaneReplicas)
	manifest, err := os.Create(filepath.Join(q.dir, clusterManifest))
	if err != nil {
		return err
	}
	err = q.command(ctx, []string{flavors.FormatVariable + "=" + string(q.set.format)}, manifest,
		"clusterctl", "generate", "cluster", clusterName, "--config", clusterctlConfig, "--flavor", flavors.FormatsFlavor,
		"--kubernetes-version", objects.KubernetesVersion, "--control-plane-machine-count", replicas, "--worker-machine-count", "1")
	if cerr := manifest.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := q.command(ctx, nil, nil, "kubectl", "apply", "-f", clusterManifest); err != nil {
		return err
	}
	want := q.set.controlPlaneReplicas + 1
	if err := q.describeUntilRunning(ctx, p, want); err != nil {
		return err
	}

	kubeconfig, err := os.Create(filepath.Join(q.dir, workloadKubeconfig))
	if err != nil {
		return err
	}
	err = q.command(ctx, nil, kubeconfig, "clusterctl", "get", "kubeconfig", clusterName)
	if cerr := kubeconfig.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := q.waitForNodes(ctx, p, want); err != nil {
		return err
	}
	if err := q.command(ctx, nil, nil, "kubectl", "--kubeconfig", workloadKubeconfig, "get", "nodes,pods", "-A", "-o", "wide"); err != nil {
		return err
	}
	q.printNextSteps()
	return nil
}

// describeUntilRunning shows clusterctl describe cluster each time a
// Machine appears or changes phase (and every 30 s) until want Machines run
// with a Node.
func (q *quickStart) describeUntilRunning(ctx context.Context, p *progress, want int) error {
	p.sayf("waiting for %d Machines (%s) to run; clusterctl describe shows them as they progress", want, q.set.format)
	last, lastShown := "", time.Time{}
	for {
		rows, err := stack.MachineTable(ctx, q.client, clusterNamespace)
		if err == nil && (phases(rows) != last || time.Since(lastShown) > 30*time.Second) {
			fmt.Println()
			p.sayf("machines running: %d/%d", stack.CountDone(rows), want)
			if err := q.command(ctx, nil, nil, "clusterctl", "describe", "cluster", clusterName); err != nil {
				fmt.Printf("clusterctl describe: %v\n", err)
			}
			last, lastShown = phases(rows), time.Now()
		}
		if err == nil && len(rows) == want && stack.CountDone(rows) == want {
			p.sayf("all %d Machines run", want)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}

// phases says which Machines there are and their phases.
func phases(rows []stack.MachineRow) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s=%s ", r.Machine, r.Phase)
	}
	return b.String()
}

// waitForNodes waits until the workload cluster's want Nodes are Ready and
// its pods Running: once the simulated cloud routed the pod networks (it
// stands in for the quick start's CNI), CoreDNS and kube-proxy run.
func (q *quickStart) waitForNodes(ctx context.Context, p *progress, want int) error {
	kubeconfig, err := os.ReadFile(filepath.Join(q.dir, workloadKubeconfig))
	if err != nil {
		return err
	}
	last := ""
	for {
		status, err := stack.ReadWorkloadStatus(ctx, kubeconfig)
		if err == nil && status.String() != last {
			p.sayf("workload cluster: %s", status)
			last = status.String()
		}
		if err == nil && status.Done(want) {
			p.sayf("every workload node is Ready")
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func (q *quickStart) printNextSteps() {
	fmt.Printf(`
The workload cluster runs on simulated hosts: each is a node with containerd, runc and the real kubelet,
its control plane in containers from kubeadm's static pod manifests. Cluster API and every provider run
as Pods of the management cluster. In the second terminal, for instance:

  clusterctl describe cluster %[1]s
  kubectl get kubeadmconfigs
  kubectl --kubeconfig %[2]s get nodes,pods -A

Scale the workers, or move them to another format, through the Cluster's topology:

  kubectl patch cluster %[1]s --type json \
    -p '[{"op":"replace","path":"/spec/topology/workers/machineDeployments/0/replicas","value":2}]'
  kubectl patch cluster %[1]s --type json \
    -p '[{"op":"replace","path":"/spec/topology/workers/machineDeployments/0/variables/overrides/0/value","value":"raw"}]'

Logs: %[3]s (manager.log, cluster-api.log, hosts/<namespace>/<machine>/).
Ctrl-C stops everything.
`, clusterName, workloadKubeconfig, q.dir)
}

// command prints a command as a user types it in the demo's directory and
// runs it there, with KUBECONFIG on the management cluster and env added;
// its output goes to stdout, or to out (printed as a redirection).
func (q *quickStart) command(ctx context.Context, env []string, out *os.File, name string, args ...string) error {
	line := strings.Join(append(append(slices.Clone(env), name), quoteAll(args)...), " ")
	var stdout io.Writer = os.Stdout
	if out != nil {
		line += " > " + filepath.Base(out.Name())
		stdout = out
	}
	fmt.Printf("$ %s\n", line)
	path := map[string]string{"clusterctl": q.clusterctl, "kubectl": q.kubectl}[name]
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = q.dir, stdout, os.Stderr
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+q.kubeconfig), env...)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", line, err)
	}
	return nil
}

// quoteAll quotes for a POSIX shell the arguments that need it.
func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"$`\\|&;<>(){}*?[]#~") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return out
}
