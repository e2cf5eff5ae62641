package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/store"
)

// What every long-running command (dev, api, shard, operator) does before its own work: make its
// logger, start the profiler, open the database and listen.

// processOptions are the flags every long-running command takes.
type processOptions struct {
	logLevel  string
	pprofAddr string
}

// addProcessFlags adds --log-level and, for a command that serves HTTP itself, --pprof-addr: Go's
// profiler on a separate address, off unless asked for, never on the public port.
func addProcessFlags(cmd *cobra.Command, o *processOptions, withPprof bool) {
	f := cmd.Flags()
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if withPprof {
		f.StringVar(&o.pprofAddr, "pprof-addr", "", "serve Go's profiler (net/http/pprof) on this address, e.g. 127.0.0.1:6060 (off when empty)")
	}
}

// startProcess returns the logger, writing text to stderr at --log-level, and starts the profiler
// when --pprof-addr is set.
func startProcess(o processOptions) (*slog.Logger, error) {
	log, err := newLogger(os.Stderr, o.logLevel)
	if err != nil {
		return nil, err
	}
	if err := startPprof(o.pprofAddr, log); err != nil {
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

// startPprof serves the profiler on addr in the background.
func startPprof(addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := listen(addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr: %w", err)
	}
	log.Info("profiler serving", "addr", ln.Addr().String())
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}

// openStore connects to Postgres and brings its schema up to date: every process migrates at start
// (concurrent migrations are serialised by the migration library's lock), so no install step has to.
func openStore(ctx context.Context, url string, log *slog.Logger) (*store.Store, error) {
	st, err := store.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	from, to, err := st.Migrate(ctx)
	if err != nil {
		st.Close()
		return nil, err
	}
	if from != to {
		log.Info("migrated the database", "from", from, "to", to)
	}
	return st, nil
}

// listen listens on addr (TCP), the address a command serves on.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("while listening on %s: %w", addr, err)
	}
	return ln, nil
}
