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

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/kit/signals"
)

func main() {
	limitMemory(memlimit.FromCgroup)
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pmx:", err)
		os.Exit(1)
	}
}

// signalContext is cmd's context, ended by the first SIGINT or SIGTERM (package signals).
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signals.Context(cmd.Context())
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
