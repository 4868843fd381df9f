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

package systemd

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
)

type systemctlRequest struct {
	Args []string `json:"args"`
}

type systemctlResponse struct {
	Output string `json:"output"`
	Code   int    `json:"code"`
}

// Systemctl is the client: it sends its arguments to the service manager
// listening at socket and prints what it answers.
func Systemctl(socket string, args []string) int {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "System has not been booted with the simulated host's service manager: %v\n", err)
		return 1
	}
	defer conn.Close()
	if err := json.NewEncoder(conn).Encode(systemctlRequest{Args: args}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var resp systemctlResponse
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(resp.Output)
	return resp.Code
}

// Serve answers systemctl calls until the listener closes.
func (s *Manager) Serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			var req systemctlRequest
			if err := json.NewDecoder(conn).Decode(&req); err != nil {
				return
			}
			out, code := s.systemctl(req.Args)
			s.log("systemctl %s -> %d", strings.Join(req.Args, " "), code)
			if err := json.NewEncoder(conn).Encode(systemctlResponse{Output: out, Code: code}); err != nil {
				s.log("systemctl %s: answering: %v", strings.Join(req.Args, " "), err)
			}
		}()
	}
}

// systemctl carries out one call; the exit codes are systemctl's (3: not
// active, 4: no such unit).
func (s *Manager) systemctl(args []string) (string, int) {
	var words []string
	now := false
	for _, a := range args {
		switch {
		case a == "--now":
			now = true
		case strings.HasPrefix(a, "-"):
			// --no-pager, --quiet, ...: nothing to page or silence here.
		default:
			words = append(words, a)
		}
	}
	if len(words) == 0 {
		return "", 0
	}
	verb, units := words[0], words[1:]
	switch verb {
	case "daemon-reload":
		return "", 0 // units are read at every start
	case "start", "restart", "try-restart", "reload-or-restart", "stop":
		for _, u := range units {
			var err error
			switch verb {
			case "start":
				_, err = s.Start(u)
			case "stop":
				s.Stop(u)
			default:
				err = s.Restart(u)
			}
			if err != nil {
				return fmt.Sprintf("Failed to %s %s: %v\n", verb, unitName(u), err), 5
			}
		}
		return "", 0
	case "enable", "disable":
		for _, u := range units {
			s.mu.Lock()
			s.enabled[unitName(u)] = verb == "enable"
			s.mu.Unlock()
			if now && verb == "enable" {
				if _, err := s.Start(u); err != nil {
					return fmt.Sprintf("Failed to start %s: %v\n", unitName(u), err), 5
				}
			} else if now {
				s.Stop(u)
			}
		}
		return "", 0
	case "is-enabled":
		code := 0
		var b strings.Builder
		for _, u := range units {
			s.mu.Lock()
			on := s.enabled[unitName(u)]
			s.mu.Unlock()
			if on {
				b.WriteString("enabled\n")
			} else {
				b.WriteString("disabled\n")
				code = 1
			}
		}
		return b.String(), code
	case "is-active":
		code := 0
		var b strings.Builder
		for _, u := range units {
			st, _, _, _ := s.Status(u)
			b.WriteString(string(st) + "\n")
			if st != StateActive {
				code = 3
			}
		}
		return b.String(), code
	case "status":
		var b strings.Builder
		code := 0
		for _, u := range units {
			name := unitName(u)
			if _, err := loadUnit(name); err != nil {
				fmt.Fprintf(&b, "Unit %s could not be found.\n", name)
				code = 4
				continue
			}
			st, starts, failures, _ := s.Status(name)
			fmt.Fprintf(&b, "* %s\n     Loaded: loaded\n     Active: %s (started %d times, failed %d times)\n", name, st, starts, failures)
			if st != StateActive && code == 0 {
				code = 3
			}
		}
		return b.String(), code
	}
	return fmt.Sprintf("systemctl %s: not supported on a simulated host\n", verb), 1
}
