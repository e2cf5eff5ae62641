// Command pmx is the pmx exchange: one binary whose subcommands run each part of it.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pmx:", err)
		os.Exit(1)
	}
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
	root.AddCommand(newDevCommand(), newAPICommand(), newShardCommand(), newOperatorCommand(), newMigrateCommand(), newLoadgenCommand(), newDemoCommand(), newBenchCommand())
	return root
}
