package bench

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// guard bounds every blocking read and write of these tests, so that a broken proxy fails them
// instead of hanging them; it is never what a test measures.
const guard = time.Minute

// upstream is a loopback TCP server for the proxy to forward to: every connection it accepts is
// handled by handle, and stop closes it and waits for every handler.
func upstream(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(guard))
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func echo(c net.Conn) { _, _ = io.Copy(c, c) }

// proxy starts a delay proxy to addr, closed at the end of the test.
func proxy(t *testing.T, addr string, roundTrip time.Duration) *delayProxy {
	t.Helper()
	p, err := startDelayProxy("tcp", addr, roundTrip)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(guard))
	return c
}

// TestDelayProxyRoundTrip: a round trip through the proxy takes at least the round trip it adds
// (a lower bound only: how much longer it takes depends on the machine).
func TestDelayProxyRoundTrip(t *testing.T) {
	const roundTrip = 20 * time.Millisecond
	p := proxy(t, upstream(t, echo), roundTrip)
	c := dial(t, p.Addr())
	buf := make([]byte, 4)
	for i := range 5 {
		start := time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < roundTrip || string(buf) != "ping" {
			t.Errorf("round trip %d: %q back after %v, want ping after at least %v", i+1, buf, took, roundTrip)
		}
	}
	if _, err := startDelayProxy("tcp", p.Addr(), 0); err == nil {
		t.Error("a proxy that adds no round trip started")
	}
}

// TestDelayProxyIntact sends different streams through the proxy on several connections at once,
// in writes of every size, and checks that each comes back whole and in order.
func TestDelayProxyIntact(t *testing.T) {
	p := proxy(t, upstream(t, echo), 2*time.Millisecond)
	const conns, size = 8, 1 << 20
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		c := dial(t, p.Addr())
		sent := make([]byte, size)
		rng := rand.New(rand.NewPCG(uint64(i), 53))
		for j := range sent {
			sent[j] = byte(rng.Uint32())
		}
		wg.Add(2)
		go func() { // the writer: pieces of 1 byte to 100 KiB
			defer wg.Done()
			for rest := sent; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(100<<10))
				if _, err := c.Write(rest[:n]); err != nil {
					errs <- err
					return
				}
				rest = rest[n:]
			}
		}()
		go func() {
			defer wg.Done()
			got := make([]byte, size)
			if _, err := io.ReadFull(c, got); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, sent) {
				errs <- errors.New("a stream came back changed")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestDelayProxyEnds: a side that closes its end has the other side see the end, after the bytes
// sent before it; a half-closed side still receives the answer.
func TestDelayProxyEnds(t *testing.T) {
	got := make(chan string, 1)
	p := proxy(t, upstream(t, func(c net.Conn) {
		b, err := io.ReadAll(c) // to the client's end
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(b)
		_, _ = c.Write([]byte("bye"))
		// returning closes the connection: the client must see its end
	}), 2*time.Millisecond)

	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "hello" {
		t.Errorf("the server read %q to the end, want hello", s)
	}
	if b, err := io.ReadAll(c); err != nil || string(b) != "bye" {
		t.Errorf("the client read %q to the end (%v), want bye", b, err)
	}

	// A client that closes: the server reads what it sent, then the end.
	c = dial(t, p.Addr())
	if _, err := c.Write([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if s := <-got; s != "gone" {
		t.Errorf("the server read %q to the end, want gone", s)
	}
}

// TestDelayProxyClose: Close ends every connection, bytes held or not, and returns once the proxy's
// goroutines have ended.
func TestDelayProxyClose(t *testing.T) {
	accepted := make(chan struct{}, 4)
	p := proxy(t, upstream(t, func(c net.Conn) {
		accepted <- struct{}{}
		_, _ = io.Copy(io.Discard, c)
	}), time.Hour) // what the clients send is never delivered
	var clients []net.Conn
	for range 3 {
		c := dial(t, p.Addr())
		if _, err := c.Write([]byte("held")); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	for range clients {
		<-accepted // each connection is piped, its bytes held
	}
	if err := p.Close(); err != nil { // waits for the goroutines
		t.Fatal(err)
	}
	p.mu.Lock()
	open := len(p.conns)
	p.mu.Unlock()
	if open != 0 {
		t.Errorf("%d connections open after Close", open)
	}
	for i, c := range clients {
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("client %d read %d bytes after Close, want its connection closed", i+1, n)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
