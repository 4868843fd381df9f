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
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// A host gets a cgroup of its own in every hierarchy of this machine and a
// cgroup namespace rooted there: inside, its kubelet and containerd see a
// machine of their own (the kubelet's kubepods tree is /kubepods) and two
// kubelets on this machine never share a cgroup. The Lab creates the cgroups
// before the host starts and removes them, bottom up, once it stopped.

// cgroupHierarchy is one cgroup file system mounted on this machine.
type cgroupHierarchy struct {
	// Mount is where it is mounted (/sys/fs/cgroup/cpu).
	Mount string `json:"mount"`
	// FSType is cgroup or cgroup2; Options its mount options (cpu,
	// name=systemd).
	FSType  string `json:"fsType"`
	Options string `json:"options"`
}

// machineCgroups lists this machine's cgroup hierarchies under /sys/fs/cgroup.
func machineCgroups() ([]cgroupHierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hs []cgroupHierarchy
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || (b[0] != "cgroup" && b[0] != "cgroup2") || !strings.HasPrefix(a[4], "/sys/fs/cgroup") {
			continue
		}
		var opts []string
		for _, o := range strings.Split(b[2], ",") {
			if o != "rw" && o != "ro" {
				opts = append(opts, o)
			}
		}
		hs = append(hs, cgroupHierarchy{Mount: a[4], FSType: b[0], Options: strings.Join(opts, ",")})
	}
	if len(hs) == 0 {
		return nil, errors.New("no cgroup file systems under /sys/fs/cgroup")
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].Mount < hs[j].Mount })
	return hs, sc.Err()
}

// createCgroup makes the host's cgroup in every hierarchy.
func createCgroup(hs []cgroupHierarchy, name string) error {
	for _, h := range hs {
		dir := filepath.Join(h.Mount, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		if h.FSType == "cgroup" && strings.Contains(","+h.Options+",", ",cpuset,") {
			// A cpuset cgroup takes no task until it has CPUs and memory nodes.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h.Mount, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// joinCgroup moves the calling process into the host's cgroup everywhere.
func joinCgroup(hs []cgroupHierarchy, name string) error {
	for _, h := range hs {
		if err := os.WriteFile(filepath.Join(h.Mount, name, "cgroup.procs"), []byte("0"), 0o644); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", filepath.Join(h.Mount, name), err)
		}
	}
	return nil
}

// mountCgroups mounts the hierarchies again inside the host's mount and
// cgroup namespaces, so that their roots are the host's cgroup.
func mountCgroups(hs []cgroupHierarchy) error {
	if err := syscall.Mount("tmpfs", "/sys/fs/cgroup", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "mode=755"); err != nil {
		return fmt.Errorf("tmpfs over /sys/fs/cgroup: %w", err)
	}
	for _, h := range hs {
		if err := os.MkdirAll(h.Mount, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount("cgroup", h.Mount, h.FSType, syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, h.Options); err != nil {
			return fmt.Errorf("mounting %s (%s %s): %w", h.Mount, h.FSType, h.Options, err)
		}
	}
	return nil
}

// removeCgroup removes the host's cgroup and everything the kubelet and the
// containers made below it, deepest first. Its processes must be gone; the
// kernel may take a moment to notice that they are.
func removeCgroup(hs []cgroupHierarchy, name string) error {
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h.Mount, name)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
					break
				}
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// leftoverCgroups lists the cgroups named with prefix in any hierarchy.
func leftoverCgroups(hs []cgroupHierarchy, prefix string) []string {
	var left []string
	for _, h := range hs {
		matches, _ := filepath.Glob(filepath.Join(h.Mount, prefix+"*"))
		left = append(left, matches...)
	}
	return left
}

// removeStaleCgroups removes host cgroups that a Lab of a process killed
// before it could clean up left behind: those without any process left.
func removeStaleCgroups(hs []cgroupHierarchy) {
	names := map[string]bool{}
	for _, c := range leftoverCgroups(hs, CgroupPrefix) {
		names[filepath.Base(c)] = true
	}
	for name := range names {
		if !cgroupEmpty(hs, name) {
			continue // a running Lab's host
		}
		_ = removeCgroup(hs, name)
	}
}

// cgroupEmpty is true when no process is in the cgroup or below it.
func cgroupEmpty(hs []cgroupHierarchy, name string) bool {
	empty := true
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h.Mount, name), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil //nolint:nilerr // what cannot be read holds no process to wait for
			}
			if b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				empty = false
				return filepath.SkipAll
			}
			return nil
		})
	}
	return empty
}
