// Package serve is what the subcommands of pmx that serve the public API (dev, api) share: their
// flags (connection and rate limits, trusted proxies, the shutdown delay) and their HTTP server.
package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/cmd/process"
	"github.com/pmx-dev/pmx/internal/kit/clientaddr"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
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

// Options are the flags of a command that serves the public API (dev, api).
type Options struct {
	maxConnsPerClient int
	Read, Write       ratelimit.Limit
	trustedProxies    string
	Proxies           clientaddr.Proxies // trustedProxies, read by Check
	shutdownDelay     time.Duration
}

// HTTPLimits are the HTTP server's limits these flags set.
func (o *Options) HTTPLimits() httpkit.Limits {
	return httpkit.Limits{MaxConnsPerClient: o.maxConnsPerClient, ShutdownDelay: o.shutdownDelay}
}

func AddFlags(cmd *cobra.Command, o *Options) {
	def, err := strconv.Atoi(process.EnvOr("PMX_MAX_CONNS_PER_CLIENT", "512"))
	if err != nil {
		def = 512
	}
	cmd.Flags().IntVar(&o.maxConnsPerClient, "max-conns-per-client", def,
		"connections one IP address may hold open at once; more are closed at once (-1: no limit, as behind a proxy that every client comes through; default $PMX_MAX_CONNS_PER_CLIENT or 512)")
	f := cmd.Flags()
	f.DurationVar(&o.shutdownDelay, "shutdown-delay", 0,
		"on SIGTERM, keep serving this long before closing the port, answering /readyz 503 and closing each connection after its answer, so that a load balancer or Kubernetes Service stops sending new connections here first (the chart sets 5s)")
	f.StringVar(&o.trustedProxies, "trusted-proxies", process.EnvOr("PMX_TRUSTED_PROXIES", ""),
		"comma-separated CIDR ranges of the proxies in front of this server whose X-Forwarded-For names the client, for per-address limits and API keys' address allowlists (default $PMX_TRUSTED_PROXIES, or none: the header is ignored and the client is the TCP peer)")
	envFloat := func(name string, def float64) float64 {
		if v, err := strconv.ParseFloat(process.EnvOr(name, ""), 64); err == nil {
			return v
		}
		return def
	}
	f.Float64Var(&o.Read.Rate, "read-rate", envFloat("PMX_READ_RATE", ratelimit.DefaultRead.Rate),
		"reads (GET requests, WebSocket connections and their subscriptions) each account may make per second, across every front replica (0: no limit; default $PMX_READ_RATE or 100)")
	f.Float64Var(&o.Read.Burst, "read-burst", envFloat("PMX_READ_BURST", ratelimit.DefaultRead.Burst),
		"reads an account may make at once, after a quiet spell (default $PMX_READ_BURST or 200)")
	f.Float64Var(&o.Write.Rate, "write-rate", envFloat("PMX_WRITE_RATE", ratelimit.DefaultWrite.Rate),
		"writes each account may make per second, a batch counting each order or cancel it names (0: no limit; default $PMX_WRITE_RATE or 50)")
	f.Float64Var(&o.Write.Burst, "write-burst", envFloat("PMX_WRITE_BURST", ratelimit.DefaultWrite.Burst),
		"writes an account may make at once, after a quiet spell (default $PMX_WRITE_BURST or 100)")
}

// Check checks the rate limit flags and --shutdown-delay, and reads --trusted-proxies.
func (o *Options) Check() error {
	var err error
	if o.Proxies, err = clientaddr.ParseProxies(o.trustedProxies); err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	if o.shutdownDelay < 0 {
		return fmt.Errorf("--shutdown-delay must be 0 or more, not %v", o.shutdownDelay)
	}
	for _, l := range []struct {
		name string
		lim  ratelimit.Limit
	}{{"read", o.Read}, {"write", o.Write}} {
		if l.lim.Rate < 0 || (l.lim.Rate > 0 && l.lim.Burst < 1) {
			return fmt.Errorf("--%s-rate must be 0 (no limit) or more, and --%s-burst at least 1 when it is not 0", l.name, l.name)
		}
	}
	return nil
}

// Serve runs an HTTP server on ln, within limits (httpkit.Serve), until ctx ends, then shuts it
// down gracefully: it stops accepting connections and waits for the requests in flight.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, limits httpkit.Limits, log *slog.Logger) error {
	tuneGC()
	return httpkit.Serve(ctx, ln, h, limits, log)
}
