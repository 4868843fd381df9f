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

package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path"
	"sort"
	"strings"
)

// PodNetwork is what a node needs for its pods to reach the pods of every
// node of its cluster over the lab network, the way a cloud's route table
// and a bridge CNI plugin give it (kubenet-style): its own pod CIDR for the
// bridge and host-local plugins, and a route to each other node's pod CIDR
// through that node's address.
type PodNetwork struct {
	// PodCIDR is the node's own (Node.spec.podCIDR).
	PodCIDR string `json:"podCIDR,omitempty"`
	// Routes maps the other nodes' pod CIDRs to their lab addresses.
	Routes map[string]string `json:"routes,omitempty"`
}

// cniConfigFile is the node's CNI configuration: a bridge with host-local
// addresses from the node's pod CIDR (no masquerading: every node routes
// every pod CIDR), and port mappings.
const cniConfigFile = "10-simulated-lab.conflist"

func cniConfig(podCIDR string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "simulated-lab",
		"plugins": []map[string]any{
			{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}, "", "  ")
}

// SetPodNetwork gives the host's node its pod network: the CNI
// configuration (the kubelet reports the node Ready once the runtime has
// one), the routes, and the masquerading of what its pods send to the lab
// network. Only what changed since the last call is applied.
func (h *Host) SetPodNetwork(n PodNetwork) error {
	h.mu.Lock()
	last := h.podNetwork
	h.mu.Unlock()
	if last != nil && last.PodCIDR == n.PodCIDR && maps.Equal(last.Routes, n.Routes) {
		return nil
	}
	if n.PodCIDR != "" && (last == nil || last.PodCIDR != n.PodCIDR) {
		conf, err := cniConfig(n.PodCIDR)
		if err != nil {
			return err
		}
		if out, err := h.execWithInput(conf, "sh", "-c", fmt.Sprintf("mkdir -p %s && cat > %s", cniConfigDir, path.Join(cniConfigDir, cniConfigFile))); err != nil {
			return fmt.Errorf("writing the CNI configuration on %s: %w: %s", h.Name, err, out)
		}
		if out, err := h.execWithInput([]byte(masquerade(n.PodCIDR, h.lab.Subnet.String())), "sh", "-e"); err != nil {
			return fmt.Errorf("masquerading pods on %s: %w: %s", h.Name, err, out)
		}
	}
	var script strings.Builder
	cidrs := make([]string, 0, len(n.Routes))
	for c := range n.Routes {
		cidrs = append(cidrs, c)
	}
	sort.Strings(cidrs)
	for _, c := range cidrs {
		if last == nil || last.Routes[c] != n.Routes[c] {
			fmt.Fprintf(&script, "ip route replace %s via %s dev eth0 proto static\n", c, n.Routes[c])
		}
	}
	if last != nil {
		for c := range last.Routes {
			if _, ok := n.Routes[c]; !ok {
				fmt.Fprintf(&script, "ip route del %s proto static || true\n", c)
			}
		}
	}
	if script.Len() > 0 {
		if out, err := h.execWithInput([]byte(script.String()), "sh", "-e"); err != nil {
			return fmt.Errorf("routes on %s: %w: %s", h.Name, err, out)
		}
	}
	h.mu.Lock()
	h.podNetwork = &PodNetwork{PodCIDR: n.PodCIDR, Routes: maps.Clone(n.Routes)}
	h.mu.Unlock()
	return nil
}

// masquerade is the rule that gives the node's address to what its pods
// send to the lab network (the Lab's API, load balancers, other clusters'
// nodes): no route there leads back to a pod CIDR, as a cloud's NAT gives a
// pod's traffic its node's address. Traffic to other pod CIDRs keeps its pod
// address.
func masquerade(podCIDR, labSubnet string) string {
	rule := fmt.Sprintf("POSTROUTING -s %s -d %s -o eth0 -j MASQUERADE", podCIDR, labSubnet)
	return fmt.Sprintf("iptables -t nat -C %s 2>/dev/null || iptables -t nat -A %s\n", rule, rule)
}

// execWithInput is Exec with stdin.
func (h *Host) execWithInput(stdin []byte, args ...string) ([]byte, error) {
	if h.cmd == nil || h.cmd.Process == nil {
		return nil, fmt.Errorf("host %s is not running", h.Name)
	}
	return execInPID(h.cmd.Process.Pid, stdin, args...)
}

// execInPID runs a command in the namespaces of the host whose first
// process is pid.
func execInPID(pid int, stdin []byte, args ...string) ([]byte, error) {
	nsenter := append([]string{"-t", fmt.Sprint(pid), "-m", "-u", "-n", "-i", "-p", "--"}, args...)
	cmd := exec.Command("nsenter", nsenter...)
	cmd.Stdin = bytes.NewReader(stdin)
	return cmd.CombinedOutput()
}
