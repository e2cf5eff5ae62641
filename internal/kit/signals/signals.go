// Package signals is how pmx's commands (pmx and pmxtools) stop: one way for both, so that a
// server and a benchmark alike finish cleanly on the first Ctrl-C or SIGTERM and die on the second.
package signals

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Context is parent, ended by the first SIGINT or SIGTERM: the command then stops cleanly (a
// server finishes the requests in flight, a benchmark stops what it started and reports). By the
// time it has ended the signals take their default action again, so a second one ends the process
// at once. (signal.NotifyContext alone would keep catching them until its stop is called.)
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-caught:
		case <-ctx.Done():
		}
		signal.Stop(caught)
		cancel()
	}()
	return ctx, cancel
}
