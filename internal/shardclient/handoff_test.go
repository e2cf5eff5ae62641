package shardclient

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
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/shardserver"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
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
	status, w, ok := shardproto.ErrorOf(exchange.ErrHandedOver)
	if !ok || status != http.StatusMisdirectedRequest || w.Code != "not_owner" || !w.HandedOver {
		t.Fatalf("ErrHandedOver travels as %d %+v", status, w)
	}
	if err := w.Err(status); !errors.Is(err, exchange.ErrHandedOver) || !errors.Is(err, exchange.ErrNotOwner) {
		t.Errorf("read back as %v", err)
	}
	_, plain, _ := shardproto.ErrorOf(exchange.ErrNotOwner)
	if plain.HandedOver || errors.Is(plain.Err(status), exchange.ErrHandedOver) {
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
	srv := httptest.NewServer(shardserver.Server{Shard: second, Store: r.st, Token: validateToken, Logger: log}.Handler())
	t.Cleanup(srv.Close)
	for name, url := range map[string]string{"shard-1": r.url, "shard-2": srv.URL} {
		if _, err := r.st.Register(ctx, name, strings.TrimPrefix(url, "http://"), ""); err != nil {
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
	if _, err := r.st.Register(ctx, "shard-0", strings.TrimPrefix(older.URL, "http://"), ""); err != nil {
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
	if n, stayed, err := front.HandOffAll(ctx, "shard-2", second, time.Minute); err != nil || n != 1 || stayed != 0 {
		t.Fatalf("HandOffAll: %d markets, %d units stayed, %v", n, stayed, err)
	}
	if o, err := r.st.Owner(ctx, r.market); err != nil || o.Shard != "shard-0" {
		t.Fatalf("after shard-2 handed everything over: %+v (%v)", o, err)
	}
	if n, stayed, err := front.HandOffAll(ctx, "shard-2", second, time.Minute); err != nil || n != 0 || stayed != 0 {
		t.Errorf("HandOffAll of a shard that owns nothing: %d markets, %d units stayed, %v", n, stayed, err)
	}

	// The operator empties shard-0, which a scale-down removes, from outside (HandOffShard): its
	// market goes to the live shard that does not drain holding the fewest (shard-1: shard-2 drains
	// too), as a failover's move since shard-0 has no planned handoff. (controllers' TestShardPool
	// empties shards that have it.)
	for _, name := range []string{"shard-0", "shard-2"} {
		if err := r.st.Drain(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := operator.HandOffShard(ctx, "shard-0", time.Minute); err != nil || n != 1 {
		t.Fatalf("HandOffShard: %d markets, %v", n, err)
	}
	if o, err := r.st.Owner(ctx, r.market); err != nil || o.Shard != "shard-1" {
		t.Fatalf("after the operator emptied shard-0: %+v (%v), want shard-1's", o, err)
	}
	if n, err := operator.HandOffShard(ctx, "shard-0", time.Minute); err != nil || n != 0 {
		t.Errorf("HandOffShard of a shard that owns nothing: %d markets, %v", n, err)
	}

	// shard-1 stops too, the others draining: no live shard of its market's pool can take it, and
	// HandOffAll says the unit stayed, for the stopping shard to wait for its pool's successors.
	if n, stayed, err := front.HandOffAll(ctx, "shard-1", r.sh, time.Minute); err != nil || n != 0 || stayed != 1 {
		t.Errorf("HandOffAll with every other shard draining: %d markets, %d units stayed, %v; want 0, 1", n, stayed, err)
	}
	if o, err := r.st.Owner(ctx, r.market); err != nil || o.Shard != "shard-1" {
		t.Errorf("after a HandOffAll with nowhere to go: %+v (%v), want shard-1's still", o, err)
	}
}

// TestHandOffRefused: the old owner refuses, with nothing moved, a handoff to a shard that is not
// live and one of some of an event's markets without the others (issue 51); the operator's router
// reads each refusal as the store's error, which says what to do. The whole event goes.
func TestHandOffRefused(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	// shard-2 is live but serves nothing: the take-over the operator sends it after a move fails,
	// which only slows the new owner's first use.
	for name, addr := range map[string]string{"shard-1": strings.TrimPrefix(r.url, "http://"), "shard-2": "127.0.0.1:1"} {
		if _, err := r.st.Register(ctx, name, addr, ""); err != nil {
			t.Fatal(err)
		}
	}
	e, _, err := eventrec.Record(ctx, r.st, uuid.Nil, "cup", eventrec.Spec{Question: "Who wins the cup?", Category: "sports",
		Outcomes: []event.Outcome{{Key: "red", Label: "Red"}, {Key: "blue", Label: "Blue"}, {Key: "green", Label: "Green"}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ids := []uuid.UUID{r.market}
	for _, o := range e.Outcomes {
		ids = append(ids, o.MarketID)
	}
	owners := make([]store.Ownership, len(ids))
	for i, id := range ids {
		if owners[i], err = r.st.Assign(ctx, id, "shard-1"); err != nil {
			t.Fatal(err)
		}
	}
	operator := &Router{Store: r.st, Token: validateToken, Lifecycle: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, c := range []struct {
		what    string
		markets []uuid.UUID
		to      string
		refusal error
		says    string
	}{
		{"to a name no shard registered", ids[:1], "shard-9", store.ErrTargetNotLive, "move them to a live shard"},
		{"one of the event's three markets", ids[1:2], "shard-2", store.ErrSplitsEvent, "name all of them"},
		{"two of the event's markets and another", ids[:3], "shard-2", store.ErrSplitsEvent, "name all of them"},
	} {
		moved, err := operator.HandOff(ctx, c.markets, "shard-1", c.to)
		if moved || !errors.Is(err, c.refusal) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: moved %v (%v), want refused with %v", c.what, moved, err, c.refusal)
		}
		for i, id := range ids {
			if o, err := r.st.Owner(ctx, id); err != nil || o.Shard != "shard-1" || o.Epoch != owners[i].Epoch {
				t.Fatalf("%s: market %d is %q's at epoch %d (%v), want shard-1's at %d", c.what, i, o.Shard, o.Epoch, err, owners[i].Epoch)
			}
		}
		// The shard still serves what it refused to hand over.
		if _, err := r.sh.OrderBook(ctx, c.markets[0]); err != nil {
			t.Errorf("%s: the owner's book afterwards: %v", c.what, err)
		}
	}
	if moved, err := operator.HandOff(ctx, ids[1:], "shard-1", "shard-2"); err != nil || !moved {
		t.Fatalf("the whole event: moved %v (%v)", moved, err)
	}
	for _, id := range ids[1:] {
		if o, err := r.st.Owner(ctx, id); err != nil || o.Shard != "shard-2" {
			t.Errorf("after the whole event's handoff: %+v (%v), want shard-2's", o, err)
		}
	}
}

// TestHandOffAllAfterARefusal: a unit whose move fails stays from's, counted with the units that
// stayed (a stopping shard waiting for its pool's successors hands it over later), and the shard
// that refused is not asked again in the same call — the chart's shards, SIGTERMed together, each
// find the other live at first, and every move to it then fails once it has begun to stop.
func TestHandOffAllAfterARefusal(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	markets := []uuid.UUID{r.market, storetest.Market(t, r.st), storetest.Market(t, r.st)}
	for _, name := range []string{"shard-1", "shard-2", "shard-3"} {
		if _, err := r.st.Register(ctx, name, "127.0.0.1:1", ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range markets {
		if _, err := r.st.Assign(ctx, id, "shard-1"); err != nil {
			t.Fatal(err)
		}
	}
	// shard-3 owns one market already: shard-2, holding none, is the first choice.
	if _, err := r.st.Assign(ctx, storetest.Market(t, r.st), "shard-3"); err != nil {
		t.Fatal(err)
	}
	front := &Router{Store: r.st, Token: validateToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	asked := map[string]int{}
	handed, stayed, err := front.handOffAll(ctx, "shard-1", time.Minute, "refused",
		func(_ context.Context, unit []uuid.UUID, to string) (bool, error) {
			asked[to]++
			if to == "shard-2" {
				return false, errors.New("shard-2 is stopping")
			}
			return true, nil
		})
	if err != nil || handed != 2 || stayed != 1 || asked["shard-2"] != 1 || asked["shard-3"] != 2 {
		t.Errorf("handOffAll: %d markets handed, %d units stayed, asked %v (%v); want 2, 1, shard-2 once and shard-3 for the rest",
			handed, stayed, asked, err)
	}
}
