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
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// inotifyLimits are the machine-wide limits every host's kubelet, containerd
// and pods draw from: inotify instances and watches belong to the user (root
// for every host), not to a namespace. The kernel's default of 128
// instances runs out at about fifteen nodes (the kubelet's cAdvisor then
// fails with "inotify_init: too many open files"); these are the values
// kind recommends for many nodes on one machine.
var inotifyLimits = map[string]int{
	"/proc/sys/fs/inotify/max_user_instances": 8192,
	"/proc/sys/fs/inotify/max_user_watches":   524288,
}

// raisedLimit is a limit the Lab raised, and what it was.
type raisedLimit struct {
	path          string
	before, after int
}

// raiseLimits raises each limit below what the hosts need and returns what
// it changed, for restoreLimits.
func raiseLimits() ([]raisedLimit, error) {
	var raised []raisedLimit
	for path, want := range inotifyLimits {
		current, err := readLimit(path)
		if err != nil {
			return raised, err
		}
		if current >= want {
			continue
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(want)), 0o644); err != nil {
			return raised, fmt.Errorf("raising %s to %d: %w", path, want, err)
		}
		raised = append(raised, raisedLimit{path: path, before: current, after: want})
	}
	return raised, nil
}

// restoreLimits puts back what raiseLimits changed, where nothing else
// changed it since.
func restoreLimits(raised []raisedLimit) {
	for _, r := range raised {
		if current, err := readLimit(r.path); err == nil && current == r.after {
			_ = os.WriteFile(r.path, []byte(strconv.Itoa(r.before)), 0o644)
		}
	}
}

func readLimit(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// minFreeDisk is the share of the state directory's file system that must be
// free when a Lab starts. Every host's containerd root and overlay layers
// live there, and a run writes a few GiB. (Each kubelet measures that file
// system as its own; the node image turns its disk-based image garbage
// collection and eviction off, see kubeletDefaults.)
const minFreeDisk = 0.15

// checkFreeDisk refuses to start on a file system the kubelets would find
// under pressure, with the figures, rather than letting pods vanish later.
func checkFreeDisk(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	free := float64(st.Bavail) / float64(st.Blocks)
	if free < minFreeDisk {
		return fmt.Errorf("%s: %.0f%% of its file system is free (%d GiB); the hosts' containerd roots and layers share it, so at least %.0f%% must be free to start",
			dir, free*100, st.Bavail*uint64(st.Bsize)>>30, minFreeDisk*100)
	}
	return nil
}
