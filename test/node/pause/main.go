// The pause container of the test node's pods: it holds the pod's namespaces and does nothing
// else until it is told to stop. Built static (CGO_ENABLED=0) by test/node/build.sh, so that the
// image needs no libc and no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		// As PID 1 of the pod it inherits orphans: reap them, or they stay zombies.
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
