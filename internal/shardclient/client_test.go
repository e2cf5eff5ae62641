package shardclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shardproto"
)

// TestShardClientLostAnswers checks what a failed call to a shard tells the router: a shard that
// cannot be reached never saw the request, so it may go to the market's next owner; a write whose
// answer was lost may have been carried out, so it must not be sent again; a read always may.
func TestShardClientLostAnswers(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	unreachable := &shardClient{base: gone, token: "t", http: http.DefaultClient}
	if err := unreachable.call(ctx, http.MethodPost, shardproto.PathPlace, exchange.PlaceRequest{}, nil); !errors.Is(err, exchange.ErrNotOwner) || errors.Is(err, exchange.ErrOutcomeUnknown) {
		t.Errorf("unreachable shard: %v, want ErrNotOwner", err)
	}

	// A shard that takes the request and drops the connection without answering.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	dropping := &shardClient{base: srv.URL, token: "t", http: srv.Client()}
	if err := dropping.call(ctx, http.MethodPost, shardproto.PathPlace, exchange.PlaceRequest{}, nil); !errors.Is(err, exchange.ErrOutcomeUnknown) || errors.Is(err, exchange.ErrNotOwner) {
		t.Errorf("write whose answer was lost: %v, want exchange.ErrOutcomeUnknown", err)
	}
	if err := dropping.call(ctx, http.MethodGet, shardproto.PathBook, nil, nil); !errors.Is(err, exchange.ErrNotOwner) {
		t.Errorf("read whose answer was lost: %v, want ErrNotOwner (sent again)", err)
	}
}
