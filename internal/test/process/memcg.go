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

package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// memoryCgroup is a memory cgroup a manager runs in, limited as its Pod's
// container is: over the limit, the kernel kills it.
type memoryCgroup struct {
	dir string
	// v2 is the unified hierarchy; else cgroup v1's memory controller.
	v2 bool
}

// newMemoryCgroup makes a memory cgroup of its own limited to limit bytes
// (swap included, where the kernel accounts it).
func newMemoryCgroup(name string, limit int64) (*memoryCgroup, error) {
	c := &memoryCgroup{}
	switch {
	case exists("/sys/fs/cgroup/cgroup.controllers"):
		c.v2, c.dir = true, "/sys/fs/cgroup"
	case exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
		c.dir = "/sys/fs/cgroup/memory"
	default:
		return nil, errors.New("no memory cgroup controller on this machine")
	}
	c.dir = filepath.Join(c.dir, fmt.Sprintf("cabpk-test-%s-%d", strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(name)), time.Now().UnixNano()))
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, err
	}
	limits := []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}
	if c.v2 {
		limits = []string{"memory.max", "memory.swap.max"}
	}
	for i, f := range limits {
		value := strconv.FormatInt(limit, 10)
		if c.v2 && i == 1 {
			value = "0"
		}
		if err := os.WriteFile(filepath.Join(c.dir, f), []byte(value), 0o644); err != nil && (i == 0 || !errors.Is(err, os.ErrNotExist)) {
			c.remove()
			return nil, fmt.Errorf("limiting %s: %w", c.dir, err)
		}
	}
	return c, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// wrap is a command line that moves itself into the cgroup and then runs
// the command that follows it.
func (c *memoryCgroup) wrap() []string {
	return []string{"sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, c.dir}
}

// peak is the most memory the cgroup's processes have used, in bytes.
func (c *memoryCgroup) peak() (int64, error) {
	f := "memory.max_usage_in_bytes"
	if c.v2 {
		f = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, f))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// remove deletes the cgroup once its processes are gone (the kernel may
// take a moment to see that they are).
func (c *memoryCgroup) remove() {
	for range 50 {
		if err := os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
