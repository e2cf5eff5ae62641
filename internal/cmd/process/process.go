// Package process is what every subcommand of pmx that runs as a process shares: its flags
// (--log-level, --pprof-addr, --metrics-addr), its logger, profiler and metrics listener, its
// database, the listener it serves on, its signal context and its Go memory limit.
package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/kit/signals"
	"github.com/pmx-dev/pmx/internal/store"
)

// What every long-running command (dev, api, shard, operator) does before its own work: make its
// logger, start the profiler, open the database, serve its metrics and listen.

// Options are the flags every long-running command takes.
type Options struct {
	LogLevel    string
	PprofAddr   string
	MetricsAddr string
}

// AddFlags adds --log-level and, for a command that serves HTTP itself, --pprof-addr: Go's
// profiler on a separate address, off unless asked for, never on the public port.
func AddFlags(cmd *cobra.Command, o *Options, withPprof bool) {
	f := cmd.Flags()
	f.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	if withPprof {
		f.StringVar(&o.PprofAddr, "pprof-addr", "", "serve Go's profiler (net/http/pprof, its mutex profile sampling one contended wait in 10) on this address, e.g. 127.0.0.1:6060 (off when empty)")
	}
}

// AddMetricsFlag adds --metrics-addr to a command that serves HTTP itself (dev, api, shard; the
// operator has controller-runtime's --metrics-bind-address): the address of its /metrics, one of
// its own, never the API's, so that what a process counts is not served to whoever can reach the
// API. def is the command's default; $PMX_METRICS_ADDR overrides it, which a build from before the
// flag ignores (pmxtools bench runs such builds too).
func AddMetricsFlag(cmd *cobra.Command, o *Options, def string) {
	cmd.Flags().StringVar(&o.MetricsAddr, "metrics-addr", EnvOr("PMX_METRICS_ADDR", def),
		"address to serve Prometheus metrics (/metrics) on, apart from the API ($PMX_METRICS_ADDR when set; empty or 0: off)")
}

// Start returns the logger, writing text to stderr at --log-level, and starts the profiler
// when --pprof-addr is set.
func Start(o Options) (*slog.Logger, error) {
	log, err := newLogger(os.Stderr, o.LogLevel)
	if err != nil {
		return nil, err
	}
	if err := startPprof(o.PprofAddr, log); err != nil {
		return nil, err
	}
	return log, nil
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// mutexProfileFraction samples one in this many contended mutex waits for /debug/pprof/mutex
// while the profiler is on: the locks every request shares are what would stop one process using
// many cores, and a 2-core machine shows them only there. One in 10 costs nothing measurable.
const mutexProfileFraction = 10

// startPprof serves the profiler on addr in the background, the mutex profile on with it.
func startPprof(addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	runtime.SetMutexProfileFraction(mutexProfileFraction)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := Listen(addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr: %w", err)
	}
	log.Info("profiler serving", "addr", ln.Addr().String())
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}

// metricsLimits bound the metrics listener: its clients are a Prometheus or two and a person with
// curl, so it holds far fewer connections than the API.
var metricsLimits = httpkit.Limits{MaxConns: 64, MaxConnsPerClient: 16}

// StartMetrics serves g's metrics (httpkit.MetricsHandler) on addr, in the background and within
// metricsLimits, and returns the address it listens on and a function that stops it. Commands
// start it as soon as they have their registry and stop it last, so that their metrics can be read
// while they load their markets and while they drain. An empty addr, or "0" (the operator's way to
// turn its metrics off), serves none: the address is then empty.
func StartMetrics(addr string, g prometheus.Gatherer, log *slog.Logger) (string, func(), error) {
	if addr == "" || addr == "0" {
		return "", func() {}, nil
	}
	ln, err := Listen(addr)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	log = log.With("server", "metrics")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := httpkit.Serve(ctx, ln, httpkit.MetricsHandler(g), metricsLimits, log); err != nil {
			log.Error("the metrics server failed", "err", err)
		}
	}()
	log.Info("metrics serving", "addr", ln.Addr().String())
	return ln.Addr().String(), func() { cancel(); <-done }, nil
}

// MetricsLine is the line of a command's banner that says where its metrics are, or nothing when
// it serves none.
func MetricsLine(addr string) string {
	if addr == "" {
		return ""
	}
	return "  Metrics:   http://" + addr + "/metrics\n"
}

// OpenStore connects to Postgres and brings its schema up to date: every process migrates at start
// (concurrent migrations are serialised by the migration library's lock), so no install step has to.
// held is how many of the pool's connections the process's matching loops keep for good
// (store.OpenHolding); 0 for a process without any.
func OpenStore(ctx context.Context, url string, log *slog.Logger, held int) (*store.Store, error) {
	st, err := store.OpenHolding(ctx, url, held)
	if err != nil {
		return nil, err
	}
	if err := MigrateStore(ctx, st, log); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// MigrateStore brings st's schema up to date, saying so when it changed it.
func MigrateStore(ctx context.Context, st *store.Store, log *slog.Logger) error {
	from, to, err := st.Migrate(ctx)
	if err != nil {
		return err
	}
	switch {
	case from > to:
		log.Warn("the database's schema is newer than this build's: serving on it without migrating, as the release before an upgrade does",
			"schema", from, "this build's", to)
	case from != to:
		log.Info("migrated the database", "from", from, "to", to)
	}
	return nil
}

// Listen listens on addr (TCP), the address a command serves on.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("while listening on %s: %w", addr, err)
	}
	return ln, nil
}

// SignalContext is cmd's context, ended by the first SIGINT or SIGTERM (package signals).
func SignalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signals.Context(cmd.Context())
}

// EnvOr reads an environment variable, with a default.
func EnvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
