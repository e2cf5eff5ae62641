package shardclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shardproto"
)

// TestShardGoneSilent: a shard address that takes no connection and refuses none — a stopped
// pod's IP, where what is sent is dropped — costs a write the dial timeout, and the write is known
// never sent (the router may send it on to the market's owner), rather than the client's whole
// timeout and an outcome unknown.
func TestShardGoneSilent(t *testing.T) {
	addr := silentAddress(t)
	r := &Router{DialTimeout: 100 * time.Millisecond}
	c := &shardClient{base: "http://" + addr, token: "t", http: r.client()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // well within the client's 10 s
	defer cancel()
	err := c.call(ctx, http.MethodPost, shardproto.PathPlace, exchange.PlaceRequest{}, nil)
	if !errors.Is(err, exchange.ErrNotOwner) || errors.Is(err, exchange.ErrOutcomeUnknown) {
		t.Errorf("a write to a shard that takes no connection: %v, want ErrNotOwner (never sent) from the dial timeout", err)
	}

	// A shard advertised by name is looked up, then reached, through the same transport.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	resp, err := r.client().Get("http://localhost:" + port + "/")
	if err != nil {
		t.Fatalf("a shard advertised by name: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("a shard advertised by name answered %d, want %d", resp.StatusCode, http.StatusTeapot)
	}
}

// silentAddress gives a loopback address whose connections neither complete nor are refused: a
// listening socket that never accepts, with a backlog of 0, its queue filled first — the kernel
// drops further handshakes, as a network drops packets to an address nobody holds.
func silentAddress(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for range 16 {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
				return addr // the queue is full: handshakes are dropped now
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
	}
	t.Fatalf("%s still took connections after 16", addr)
	return ""
}
