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

// Command node-updater applies an in-place update on the node its Pod runs
// on: it reads the NodeUpdate document, changes its root to the node's,
// runs the update there as pkg/rawagent does on a machine, and writes the
// result where the kubelet reads the Pod's termination message.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	rawv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/raw/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/pkg/rawagent"
)

// hostPath is where the node keeps kubeadm, systemctl and their tools:
// the usual places, and /opt/bin where Flatcar installs kubeadm.
const hostPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/bin"

func main() {
	root := flag.String("root", "/", "the node's root file system")
	update := flag.String("update", "", "the NodeUpdate document")
	result := flag.String("result", "/dev/termination-log", "where the result goes (the Pod's termination message)")
	flag.Parse()
	os.Exit(run(*root, *update, *result))
}

func run(root, update, result string) int {
	// Both are opened before the root changes: they are the Pod's, not
	// the node's.
	doc, err := os.ReadFile(update)
	if err != nil {
		return report(nil, rawv1.NodeUpdateResult{Step: rawv1.StepRead, Message: err.Error()})
	}
	out, err := os.OpenFile(result, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "node-updater: the result cannot be written to %s: %v\n", result, err)
	}
	if filepath.Clean(root) != "/" {
		if err := syscall.Chroot(root); err != nil {
			return report(out, rawv1.NodeUpdateResult{Step: rawv1.StepRead, Message: fmt.Sprintf("entering the node's root %s: %v", root, err)})
		}
		if err := os.Chdir("/"); err != nil {
			return report(out, rawv1.NodeUpdateResult{Step: rawv1.StepRead, Message: err.Error()})
		}
	}
	if err := os.Setenv("PATH", hostPath); err != nil {
		return report(out, rawv1.NodeUpdateResult{Step: rawv1.StepRead, Message: err.Error()})
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	agent := &rawagent.Agent{Stdout: os.Stdout, Stderr: os.Stderr, Metadata: map[rawv1.MetadataKey]string{}}
	// The Pod shares the node's network and name: its hostname is the
	// node's, for a new templated kubelet flag that needs it.
	if name, err := os.Hostname(); err == nil {
		agent.Metadata[rawv1.MetadataLocalHostname] = name
	}
	return report(out, agent.Update(ctx, doc))
}

// report writes the result and gives the exit code: non-zero when a step
// failed, so that the Pod fails.
func report(out *os.File, res rawv1.NodeUpdateResult) int {
	b, err := json.Marshal(res)
	if err != nil {
		b = []byte(`{"step":"read","message":"the result cannot be written"}`)
	}
	fmt.Fprintf(os.Stderr, "node-updater: %s\n", b)
	if out != nil {
		_, _ = out.Write(b)
		_ = out.Close()
	}
	if res.Step != "" {
		return 1
	}
	return 0
}
