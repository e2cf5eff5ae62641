// Command pmx is the pmx exchange: one binary whose subcommands run each part of it, and nothing
// else. It is what the image carries, so the tools that drive or measure an exchange (the load
// generator, the benchmarks, the engine's demo) are a command of their own, cmd/pmxtools: they
// link what production has no use for, controller-runtime's envtest among it, whose package init
// writes under /tmp, which a pod's read-only root refuses (docs/architecture.md §1).
//
// Each subcommand is a package of its own under internal/cmd (dev, api, shard, operator,
// migrate); what the processes share is internal/cmd/process, and what the servers of the public
// API share internal/cmd/serve. This file only dispatches to them.
package main

import (
	"fmt"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/cmd/api"
	"github.com/pmx-dev/pmx/internal/cmd/audit"
	"github.com/pmx-dev/pmx/internal/cmd/dev"
	"github.com/pmx-dev/pmx/internal/cmd/migrate"
	"github.com/pmx-dev/pmx/internal/cmd/operator"
	"github.com/pmx-dev/pmx/internal/cmd/process"
	"github.com/pmx-dev/pmx/internal/cmd/shard"
)

func main() {
	process.LimitMemory(memlimit.FromCgroup)
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pmx:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "pmx",
		Short:         "pmx is an open exchange for YES/NO prediction markets",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(dev.NewCommand(), api.NewCommand(), shard.NewCommand(), operator.NewCommand(), migrate.NewCommand(), audit.NewCommand())
	return root
}
