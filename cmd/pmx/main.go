// Command pmx is the pmx exchange: one binary whose subcommands run each part of it, and nothing
// else. It is what the image carries, so the tools that drive or measure an exchange (the load
// generator, the benchmarks, the engine's demo) are a command of their own, cmd/pmxtools: they
// link what production has no use for, controller-runtime's envtest among it, whose package init
// writes under /tmp, which a pod's read-only root refuses (docs/architecture.md §1).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"
)

func main() {
	limitMemory(memlimit.FromCgroup)
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pmx:", err)
		os.Exit(1)
	}
}

// signalContext is cmd's context, ended by the first SIGINT or SIGTERM: the command then stops
// cleanly (a server finishes the requests in flight). A second signal takes its default action
// and ends the process at once.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// envOr reads an environment variable, with a default.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "pmx",
		Short:         "pmx is an open exchange for YES/NO prediction markets",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCommand(), newAPICommand(), newShardCommand(), newOperatorCommand(), newMigrateCommand())
	return root
}
