// Command pmxtools holds the tools that drive and measure a pmx exchange, apart from the exchange
// itself (cmd/pmx): `loadgen` (bots against a running exchange), `bench` (the whole exchange end
// to end on this machine, and the machine's HTTP and commit floors) and `demo` (the matching
// engine, step by step). They link what no production process needs — the load generator, the Go
// SDK it sends with, controller-runtime's envtest for `bench --distributed` — so the image, which
// carries pmx alone, does not carry them (docs/architecture.md §1). bench starts the pmx beside
// this binary (`make build` puts both in bin/) unless told which with --pmx.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/kit/signals"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pmxtools:", err)
		os.Exit(1)
	}
}

// signalContext is cmd's context, ended by the first SIGINT or SIGTERM (package signals).
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signals.Context(cmd.Context())
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "pmxtools",
		Short:         "pmxtools drives and measures a pmx exchange: load generator, benchmarks, the engine's demo",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newLoadgenCommand(), newBenchCommand(), newDemoCommand())
	return root
}
