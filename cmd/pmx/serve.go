package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"
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

// serve runs an HTTP server on ln until ctx ends, then shuts it down gracefully: it stops
// accepting connections and waits for the requests in flight.
func serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	tuneGC()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("while serving HTTP: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
