// Command pause is the sandbox ("pause") container of the test cluster's pods, built here because
// no registry can be reached: it holds the pod's namespaces, reaps the orphans that end up as its
// children (it is the pod's PID 1), and exits 0 when asked to stop. hack/image/build.sh puts it
// alone in an image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	children := make(chan os.Signal, 16)
	signal.Notify(children, syscall.SIGCHLD)
	// One line, for whoever waits until a stop would be caught (its test; a container's log).
	os.Stderr.WriteString("pause: waiting for SIGTERM\n")
	for {
		select {
		case <-stop:
			return
		case <-children:
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
