package httpkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
)

// Limits bound what a client, and all clients together, can hold of a server: its connections,
// and the time it may take to send a request. A request that is slower than the limits is cut
// off; a connection over them is refused. The defaults suit the API: its requests are small, and
// a bot keeps a few connections open.
type Limits struct {
	// ReadHeader bounds the time to read a request's headers (default 5s).
	ReadHeader time.Duration
	// Read bounds the time to read a whole request, body included (default 15s): a client that
	// sends a body a byte at a time is cut off, its connection closed.
	Read time.Duration
	// Write bounds the time to write an answer (default 30s).
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next request (default 2m).
	Idle time.Duration
	// MaxHeaderBytes bounds a request's headers (default 64 KiB); more is a 431.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once (default 4096); beyond it, new connections
	// wait to be accepted until one closes.
	MaxConns int
	// MaxConnsPerClient bounds the connections open at once from one IP address (default 512;
	// negative for no bound, as behind a proxy through which every client comes from one
	// address); a connection beyond it is closed at once.
	MaxConnsPerClient int
	// ShutdownDelay, when above 0, keeps a stopping server in service that long before it stops
	// accepting connections (Serve): load balancers and a Kubernetes Service take a moment to
	// stop sending new connections to a process that is going away, and a port closed at once
	// refuses them. Meanwhile /readyz answers 503 and every answer closes its connection, so
	// that clients come back through the load balancer to another process.
	ShutdownDelay time.Duration
}

func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadHeader, 5*time.Second)
	def(&l.Read, 15*time.Second)
	def(&l.Write, 30*time.Second)
	def(&l.Idle, 2*time.Minute)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 4096
	}
	if l.MaxConnsPerClient == 0 {
		l.MaxConnsPerClient = 512
	}
	return l
}

// Serve serves h on ln within limits until ctx ends, then shuts down gracefully: it serves on
// for limits.ShutdownDelay (not ready, closing each connection after its answer), then stops
// accepting connections and waits up to 20s for the requests in flight.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, limits Limits, log *slog.Logger) error {
	limits = limits.withDefaults()
	var stopping atomic.Bool
	srv := &http.Server{Handler: notReadyWhile(&stopping, h), ReadHeaderTimeout: limits.ReadHeader, ReadTimeout: limits.Read,
		WriteTimeout: limits.Write, IdleTimeout: limits.Idle, MaxHeaderBytes: limits.MaxHeaderBytes}
	ln = netutil.LimitListener(ln, limits.MaxConns)
	if limits.MaxConnsPerClient > 0 {
		ln = &perClientListener{Listener: ln, max: limits.MaxConnsPerClient, open: map[string]int{}, log: log}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("while serving HTTP: %w", err)
	case <-ctx.Done():
	}
	if d := limits.ShutdownDelay; d > 0 {
		log.Info("stopping: serving on, not ready, until load balancers have dropped this process", "delay", d)
		stopping.Store(true) // idle connections stay open: a client may be sending on one right now
		select {
		case err := <-errc:
			return fmt.Errorf("while serving HTTP: %w", err)
		case <-time.After(d):
		}
	}
	log.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// notReadyWhile, while stopping is set (Limits.ShutdownDelay), answers /readyz 503 whatever h
// would answer, and closes the connection of every other request after h's answer, so that the
// client's next request opens a connection the load balancer sends elsewhere. A WebSocket
// upgrade is left to its handler (its connection is the feed's, until the process ends).
func notReadyWhile(stopping *atomic.Bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() && r.Header.Get("Upgrade") == "" {
			w.Header().Set("Connection", "close")
			if r.URL.Path == "/readyz" {
				http.Error(w, "stopping", http.StatusServiceUnavailable)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// perClientListener closes, as soon as they are accepted, the connections of an IP address that
// already has max open.
type perClientListener struct {
	net.Listener
	max int
	log *slog.Logger

	mu      sync.Mutex
	open    map[string]int
	refused int // since the last log line
}

func (l *perClientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		if l.open[ip] >= l.max {
			l.refused++
			first := l.refused == 1
			l.mu.Unlock()
			c.Close()
			if first {
				l.log.Warn("refusing connections: a client has as many open as it may", "client", ip, "max", l.max)
			}
			continue
		}
		l.open[ip]++
		l.refused = 0
		l.mu.Unlock()
		return &clientConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *perClientListener) release(ip string) {
	l.mu.Lock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
	l.mu.Unlock()
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// clientConn gives its client's slot back once, when closed.
type clientConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *clientConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
