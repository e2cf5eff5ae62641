package shardapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shard"
)

// TestFollow tables what follows a request its owner refused with nothing done: the first refusal
// is always tried again; later ones only within the wait, and only while the market moves (to a
// live owner) or the shard tried says it handed the market over.
func TestFollow(t *testing.T) {
	live := &shardClient{}
	a1 := route{shard: "a", epoch: 1, client: live}
	b2 := route{shard: "b", epoch: 2, client: live}
	a3 := route{shard: "a", epoch: 3, client: live}
	gone := route{epoch: 2}
	for _, c := range []struct {
		name    string
		attempt int
		tried   route
		next    route
		handed  bool
		left    time.Duration
		wait    time.Duration
		ok      bool
	}{
		{"the first refusal, owner unchanged", 0, a1, a1, false, time.Second, 0, true},
		{"the first refusal, no wait left", 0, a1, a1, false, 0, 0, true},
		{"a second refusal by an owner that did not move (killed)", 1, a1, a1, false, time.Second, 0, false},
		{"moved to another shard", 1, a1, b2, false, time.Second, 0, true},
		{"moved back under a new epoch", 3, b2, a3, true, time.Second, 0, true},
		{"moved, but the wait is over", 1, a1, b2, false, 0, 0, false},
		{"moved to no owner (unplanned)", 1, a1, gone, false, time.Second, 0, false},
		{"handed over, Postgres still names it", 1, a1, a1, true, time.Second, handoffPause, true},
		{"handed over, less wait left than a pause", 1, a1, a1, true, 5 * time.Millisecond, 5 * time.Millisecond, true},
		{"handed over, the wait is over", 4, a1, a1, true, 0, 0, false},
	} {
		wait, ok := follow(c.attempt, c.tried, c.next, c.handed, c.left)
		if wait != c.wait || ok != c.ok {
			t.Errorf("%s: wait %v ok %v, want %v %v", c.name, wait, ok, c.wait, c.ok)
		}
	}
}

// TestHandedOverOnTheWire checks that a command refused for a handoff travels as not_owner with
// handedOver, which a front of this release reads as ErrHandedOver and one of the release before
// as the not_owner it knows; a plain not_owner is still the bytes it was.
func TestHandedOverOnTheWire(t *testing.T) {
	status, w, ok := wireErrorOf(exchange.ErrHandedOver)
	if !ok || status != http.StatusMisdirectedRequest || w.Code != "not_owner" || !w.HandedOver {
		t.Fatalf("ErrHandedOver travels as %d %+v", status, w)
	}
	if err := w.err(status); !errors.Is(err, exchange.ErrHandedOver) || !errors.Is(err, exchange.ErrNotOwner) {
		t.Errorf("read back as %v", err)
	}
	_, plain, _ := wireErrorOf(exchange.ErrNotOwner)
	if plain.HandedOver || errors.Is(plain.err(status), exchange.ErrHandedOver) {
		t.Errorf("a plain not_owner reads as handed over: %+v", plain)
	}
}

// TestHandOffThroughRouter hands a market from one shard to another through the operator's router
// (POST /internal/v1/handoff, then take-over): a front whose cache still names the old owner places
// on the new one without an error, and the new owner serves the book the old one left. A shard
// without the call (the release before) has its market moved as a failover does.
func TestHandOffThroughRouter(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	second := shard.New(shard.Config{Store: r.st, Name: "shard-2", Logger: log})
	t.Cleanup(second.Stop)
	srv := httptest.NewServer(Server{Shard: second, Store: r.st, Token: validateToken, Logger: log}.Handler())
	t.Cleanup(srv.Close)
	for name, url := range map[string]string{"shard-1": r.url, "shard-2": srv.URL} {
		if _, err := r.st.Register(ctx, name, strings.TrimPrefix(url, "http://")); err != nil {
			t.Fatal(err)
		}
	}
	before, err := r.st.Assign(ctx, r.market, "shard-1")
	if err != nil {
		t.Fatal(err)
	}
	front := &Router{Store: r.st, Token: validateToken, OwnerTTL: time.Hour} // trusts its cache
	operator := &Router{Store: r.st, Token: validateToken, Lifecycle: true}
	buy := func(price int) error {
		_, err := front.Place(ctx, exchange.PlaceRequest{Account: r.account, Market: r.market, Side: engine.Buy, Outcome: engine.Yes, Price: price, Quantity: 1})
		return err
	}
	if err := buy(40); err != nil {
		t.Fatal(err)
	}
	moved, err := operator.HandOff(ctx, []uuid.UUID{r.market}, "shard-1", "shard-2")
	if err != nil || !moved {
		t.Fatalf("HandOff: moved %v, %v", moved, err)
	}
	if o, err := r.st.Owner(ctx, r.market); err != nil || o.Shard != "shard-2" || o.Epoch != before.Epoch+1 {
		t.Fatalf("after the handoff: %+v (%v)", o, err)
	}
	if err := buy(41); err != nil {
		t.Fatalf("a placement routed to the old owner after the handoff: %v", err)
	}
	snap, err := second.OrderBook(ctx, r.market)
	if err != nil || len(snap.Depth.Yes.Bids) != 2 || snap.Epoch != before.Epoch+1 {
		t.Fatalf("the new owner's book: %+v (%v), want both bids at epoch %d", snap, err, before.Epoch+1)
	}
	if moved, err := operator.HandOff(ctx, []uuid.UUID{r.market}, "shard-1", "shard-2"); err != nil || moved {
		t.Errorf("handing over from a shard that no longer owns the market: moved %v, %v", moved, err)
	}

	// A shard of the release before answers 404: the market moves as before the handoff.
	older := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(older.Close)
	if _, err := r.st.Register(ctx, "shard-0", strings.TrimPrefix(older.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Assign(ctx, r.market, "shard-0"); err != nil {
		t.Fatal(err)
	}
	if moved, err := operator.HandOff(ctx, []uuid.UUID{r.market}, "shard-0", "shard-2"); err != nil || !moved {
		t.Fatalf("HandOff from a shard without the call: moved %v, %v", moved, err)
	}
	if o, err := r.st.Owner(ctx, r.market); err != nil || o.Shard != "shard-2" {
		t.Fatalf("after the fallback: %+v (%v)", o, err)
	}

	// shard-2 stops: it hands its market to the live shard holding the fewest, by name first
	// (shard-0, which does not serve the take-over: it loads on first use). shard-2 still holds
	// the market under the epoch it was handed it with, two moves ago: it loads it afresh first.
	if n, err := front.HandOffAll(ctx, "shard-2", second, time.Minute); err != nil || n != 1 {
		t.Fatalf("HandOffAll: %d markets, %v", n, err)
	}
	if o, err := r.st.Owner(ctx, r.market); err != nil || o.Shard != "shard-0" {
		t.Fatalf("after shard-2 handed everything over: %+v (%v)", o, err)
	}
	if n, err := front.HandOffAll(ctx, "shard-2", second, time.Minute); err != nil || n != 0 {
		t.Errorf("HandOffAll of a shard that owns nothing: %d markets, %v", n, err)
	}
}
