package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/httpkit"
)

// serverGCPercent is the garbage collector's target for the servers (GOGC, default 100 in Go),
// unless GOGC is set. A server's live heap is small (~8 MB for pmx dev under load) but it
// allocates per request, so at Go's default it collected ~6 times a second and its background
// marking took ~7% of its CPU. At 400 it collects a quarter as often, for ~30 MB more heap; pmx
// bench measured 2-7% less pmx CPU per order (docs/performance.md).
const serverGCPercent = 400

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
}

// serveOptions are the flags of a command that serves the public API (dev, api).
type serveOptions struct {
	maxConnsPerClient int
}

func addServeFlags(cmd *cobra.Command, o *serveOptions) {
	def, err := strconv.Atoi(envOr("PMX_MAX_CONNS_PER_CLIENT", "512"))
	if err != nil {
		def = 512
	}
	cmd.Flags().IntVar(&o.maxConnsPerClient, "max-conns-per-client", def,
		"connections one IP address may hold open at once; more are closed at once (-1: no limit, as behind a proxy that every client comes through; default $PMX_MAX_CONNS_PER_CLIENT or 512)")
}

// serve runs an HTTP server on ln, within limits (httpkit.Serve), until ctx ends, then shuts it
// down gracefully: it stops accepting connections and waits for the requests in flight.
func serve(ctx context.Context, ln net.Listener, h http.Handler, limits httpkit.Limits, log *slog.Logger) error {
	tuneGC()
	return httpkit.Serve(ctx, ln, h, limits, log)
}
