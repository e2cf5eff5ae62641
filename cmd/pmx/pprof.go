package main

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/spf13/cobra"
)

// addPprofFlag adds --pprof-addr to a command that serves: Go's profiler on a separate address,
// off unless asked for, never on the public port.
func addPprofFlag(cmd *cobra.Command, addr *string) {
	cmd.Flags().StringVar(addr, "pprof-addr", "", "serve Go's profiler (net/http/pprof) on this address, e.g. 127.0.0.1:6060 (off when empty)")
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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("profiler serving", "addr", ln.Addr().String())
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}
