// Command pause is the process of a pod sandbox in the e2e nodes' pause image:
// it holds the pod's namespaces open, reaps the orphans that end up with it as
// their init, and exits when the runtime stops the sandbox (SIGTERM, SIGINT).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
