package httpkit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/poll"
)

// serveTest serves h within limits on a loopback port until the test ends, and returns the address.
func serveTest(t *testing.T, h http.Handler, limits Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, limits, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

// slowPost opens a connection and sends a POST's headers announcing a 60,000-byte body, and its
// first byte.
func slowPost(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: pmx\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedWithin reports whether the server closes c within d (reading and discarding what it sends).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestSlowBodyIsCutOff sends a body a byte at a time: the server closes the connection once the
// read limit has passed, however the client keeps it busy.
func TestSlowBodyIsCutOff(t *testing.T) {
	addr := serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
	}), Limits{Read: 300 * time.Millisecond})
	c := slowPost(t, addr, "/")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a byte every 50ms: it never stops on its own before the test ends
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("a connection sending its body a byte at a time was held for 10s; the read limit is 300ms")
	}
}

// TestRefusedBeforeTheBody answers a request refused on its headers at once, without waiting for
// a body sent slowly, and closes the connection.
func TestRefusedBeforeTheBody(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(func(c *gin.Context) {
		if _, ok := Bearer(c.Request); !ok {
			AbortUnread(c, &Error{Status: http.StatusUnauthorized, Code: "missing_api_key", Message: "no key"})
			return
		}
		c.Next()
	})
	e.POST("/order", func(c *gin.Context) { _, _ = io.ReadAll(c.Request.Body) })
	addr := serveTest(t, e, Limits{Read: time.Minute})
	c := slowPost(t, addr, "/order")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(status, " 401 ") {
		t.Fatalf("status line %q, %v: want a 401 before the body is sent (the read limit is a minute)", status, err)
	}
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("the connection stayed open after a 401 with an unread body")
	}
}

// TestConnectionsPerClient refuses a client's connections beyond its limit, and accepts new ones
// once it has closed some.
func TestConnectionsPerClient(t *testing.T) {
	addr := serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Limits{MaxConnsPerClient: 3})
	get := func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: pmx\r\n\r\n"); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c); err != nil { // answered: accepted and counted
			t.Fatal(err)
		}
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := get(extra); err == nil {
		t.Fatal("a fourth connection was served; the limit per client is 3")
	}
	held[0].Close()
	// The server notices the close when its read on that connection ends: try until it has.
	poll.Wait(t, 10*time.Second, "a connection accepted after one of the three closed", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return get(c) == nil
	})
}

// TestShutdownDelay stops a server that has a shutdown delay: it serves on, answering /readyz 503
// and closing each connection after its answer, until the delay has passed, and only then closes
// its port. A connection kept alive from before the stop still takes a request: closing it when
// the stop begins would fail a request the client was sending on it at that moment (the cluster
// test's roll met one such EOF).
func TestShutdownDelay(t *testing.T) {
	const delay = 2 * time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "answered "+r.URL.Path)
		}), Limits{ShutdownDelay: delay}, slog.New(slog.DiscardHandler))
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	get := func(path string) (status int, body string, closes bool) {
		t.Helper()
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Close
	}
	if status, _, closes := get("/readyz"); status != http.StatusOK || closes {
		t.Fatalf("before the stop: /readyz %d, connection closed %v; want 200 on a kept connection", status, closes)
	}
	kept, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	keptReader := bufio.NewReader(kept)
	send := func(path string) (*http.Response, error) {
		if _, err := io.WriteString(kept, "GET "+path+" HTTP/1.1\r\nHost: pmx\r\n\r\n"); err != nil {
			return nil, err
		}
		_ = kept.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(keptReader, nil)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	if resp, err := send("/before"); err != nil || resp.Close {
		t.Fatalf("before the stop, on a kept connection: %v, %+v", err, resp)
	}

	stopped := time.Now()
	cancel()
	poll.Wait(t, 5*time.Second, "/readyz to answer 503", func() bool {
		status, body, _ := get("/readyz")
		return status == http.StatusServiceUnavailable && strings.Contains(body, "stopping")
	})
	if status, body, closes := get("/orders"); status != http.StatusOK || body != "answered /orders" || !closes {
		t.Errorf("while stopping: %d %q, connection closed %v; want the request served, its connection closed", status, body, closes)
	}
	if resp, err := send("/orders"); err != nil {
		t.Errorf("while stopping, on a connection kept from before the stop: %v; want it served", err)
	} else if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("while stopping, on a connection kept from before the stop: %s, connection closed %v; want 200 and closed", resp.Status, resp.Close)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve returned (%v) %v after the stop, before its delay", err, time.Since(stopped))
	default:
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(delay + 20*time.Second):
		t.Fatal("Serve did not return after its delay")
	}
	if took := time.Since(stopped); took < delay {
		t.Errorf("the server stopped %v after the stop, before its delay of %v", took, delay)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the port still accepts connections after the delay")
	}
}
