package client_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy relays TCP connections to a real pmx, and breaks them on demand: it can lose the answers
// of the next connections (the request reaches pmx, which carries it out, but the client never
// hears back), and cut every open connection at once (a network failure under a feed).
type proxy struct {
	ln       net.Listener
	upstream string
	// loseAnswers is how many of the next connections get no answer: they are closed once the
	// request has gone upstream and the answer has begun to come back.
	loseAnswers atomic.Int32

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: make(map[net.Conn]struct{})}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

// cut closes every open connection, both ends.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) serve(client net.Conn) {
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		client.Close()
		return
	}
	for _, c := range []net.Conn{client, up} {
		p.track(c, true)
		defer p.track(c, false)
		defer c.Close()
	}
	lose := false
	for {
		n := p.loseAnswers.Load()
		if n <= 0 {
			break
		}
		if p.loseAnswers.CompareAndSwap(n, n-1) {
			lose = true
			break
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(up, client)
		up.Close()
	})
	if lose {
		// Wait for the first byte of the answer: pmx has carried out the request by then.
		var b [1]byte
		up.Read(b[:])
		client.Close()
		up.Close()
	} else {
		io.Copy(client, up)
		client.Close()
	}
	wg.Wait()
}
