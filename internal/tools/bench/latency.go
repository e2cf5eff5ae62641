package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/clock"
)

// delayProxy is a TCP proxy on a free loopback port that forwards each connection to a target
// (Postgres's unix socket, for the bench) and holds every byte, each way, for half of a round trip
// before passing it on: a round trip through it takes at least that round trip longer, as it does
// to a Postgres on another node (Options.DBLatency). Each direction keeps its bytes in order, and
// none is delivered before it has been held for its full half (bytes that arrived together may be
// delivered together; none earlier). A side that closes (or half-closes) its end has the other side
// see the end once the bytes before it are delivered; when both directions have ended, or either
// fails, both connections are closed.
type delayProxy struct {
	ln             net.Listener
	network, raddr string        // the target
	oneWay         time.Duration // half the round trip
	closing        chan struct{} // closed by Close

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open connections, both ends of each
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection's goroutines
}

// maxPreciseWait is the longest wait for a chunk's due time on a precise clock, which nothing
// interrupts; a longer one is on Go's timer, which Close interrupts.
const maxPreciseWait = 50 * time.Millisecond

// maxPending bounds the chunks one direction holds: past it the reader waits for the writer, so a
// fast sender is slowed to what the delayed stream carries instead of filling memory.
const maxPending = 1024

// startDelayProxy listens on 127.0.0.1 (a free port) and forwards every connection to address on
// network (as net.Dial takes them), adding roundTrip to every round trip through it.
func startDelayProxy(network, address string, roundTrip time.Duration) (*delayProxy, error) {
	if roundTrip <= 0 {
		return nil, fmt.Errorf("a delay proxy needs a positive round trip, not %v", roundTrip)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("while starting the database latency proxy: %w", err)
	}
	p := &delayProxy{ln: ln, network: network, raddr: address, oneWay: roundTrip / 2, closing: make(chan struct{}),
		conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection (bytes still held are dropped) and waits for the
// proxy's goroutines to end.
func (p *delayProxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	close(p.closing)
	err := p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track records c as open, or closes it and answers false once the proxy is closing.
func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *delayProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed (a loopback listener fails no other way worth retrying)
		}
		if !p.track(client) {
			return
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve connects client to the target and pipes both directions, delayed, until both end.
func (p *delayProxy) serve(client net.Conn) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	p.wg.Add(1)
	go func() { // Close stops a dial in progress too
		defer p.wg.Done()
		select {
		case <-p.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	var d net.Dialer
	server, err := d.DialContext(ctx, p.network, p.raddr)
	cancel()
	if err != nil {
		p.untrack(client)
		return
	}
	if !p.track(server) {
		p.untrack(client)
		return
	}
	var once sync.Once
	closeBoth := func() { once.Do(func() { p.untrack(client, server) }) }
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); p.pipe(server, client, closeBoth) }()
	go func() { defer both.Done(); p.pipe(client, server, closeBoth) }()
	both.Wait()
	closeBoth()
}

// chunk is bytes read from one side, to be written to the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, each read held until oneWay after it was read, in order. At src's end
// it delivers what it holds, then half-closes dst; on a failure either way it closes both (fail).
func (p *delayProxy) pipe(dst, src net.Conn, fail func()) {
	pending := make(chan chunk, maxPending)
	var readErr error
	go func() {
		defer close(pending)
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				pending <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.oneWay)}
			}
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	// Go's timers wake up to a millisecond late (package clock), which would add up to that each
	// way to the half a round trip asked for: the waits are a precise Sleeper's, save long ones,
	// which Close must be able to cut short.
	sleeper := clock.NewSleeper()
	defer sleeper.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	failed := false
	for c := range pending { // drained to the end, so that the reader never blocks for ever
		if failed {
			continue
		}
		if wait := time.Until(c.due); wait > maxPreciseWait {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-p.closing:
				timer.Stop()
			}
		} else {
			sleeper.Sleep(wait)
		}
		select {
		case <-p.closing:
			failed = true
			continue
		default:
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
			fail() // the reader's src fails too and it ends
		}
	}
	// pending is closed: the reader has ended and set readErr.
	switch {
	case failed:
	case errors.Is(readErr, io.EOF):
		if hc, ok := dst.(interface{ CloseWrite() error }); ok && hc.CloseWrite() == nil {
			return // the other direction goes on until its own end
		}
		fail()
	default:
		fail()
	}
}

// proxyDatabase starts a delay proxy in front of the Postgres at databaseURL (a pgx/libpq URL,
// of a unix socket or a TCP address) that adds roundTrip to every round trip, and returns it with
// the URL that connects through it: TCP to the proxy, with the same user and database.
func proxyDatabase(databaseURL string, roundTrip time.Duration) (*delayProxy, string, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, "", fmt.Errorf("the database URL: %w", err)
	}
	network, address := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") { // a unix socket's directory, as libpq names it
		network, address = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	p, err := startDelayProxy(network, address, roundTrip)
	if err != nil {
		return nil, "", err
	}
	u := url.URL{Scheme: "postgres", Host: p.Addr(), Path: "/" + cfg.Database, RawQuery: "sslmode=disable"}
	if cfg.User != "" {
		u.User = url.User(cfg.User)
		if cfg.Password != "" {
			u.User = url.UserPassword(cfg.User, cfg.Password)
		}
	}
	return p, u.String(), nil
}
