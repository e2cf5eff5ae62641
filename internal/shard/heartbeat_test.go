package shard

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
)

// TestSweepKeepsEventWhole: a Set that meets an event's markets first in the dead-man switch's
// sweep (a restart, with a switch that tripped covering orders in every outcome) gives them to
// one shard, as every other path does, so that the event still moves and converts as one. The
// sweep once gave each market to the least busy shard on its own: the event's two markets landed
// on two shards, and every transition of the event failed from then on.
func TestSweepKeepsEventWhole(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	e := f.newEvent(t, 2)
	before := f.shard(t, "")
	for _, o := range e.Outcomes {
		if _, err := before.Place(ctx, exchange.PlaceRequest{Account: f.alice, Market: o.MarketID, Side: engine.Buy,
			Outcome: engine.Yes, Price: 20, Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	before.Stop() // the process restarts: the Set below has seen none of the markets
	if _, err := f.st.ArmHeartbeat(ctx, f.alice, time.Millisecond); err != nil {
		t.Fatal(err)
	}

	set := NewSet(Config{Store: f.st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, 2)
	t.Cleanup(set.Stop)
	poll.Wait(t, 30*time.Second, "the sweep cancelling alice's orders", func() bool {
		var open int
		if err := f.st.Pool.QueryRow(ctx, `select count(*) from orders where account_id = $1 and status in ('OPEN', 'PARTIALLY_FILLED')`,
			f.alice).Scan(&open); err != nil {
			t.Fatal(err)
		}
		return open == 0
	})
	set.mu.Lock()
	shards := map[int]bool{}
	for _, o := range e.Outcomes {
		shards[set.owner[o.MarketID]] = true
	}
	set.mu.Unlock()
	if len(shards) != 1 {
		t.Errorf("the event's markets are on %d shards of the Set, want one", len(shards))
	}
	if err := set.TransitionEvent(ctx, e.ID, domain.EventAction{Action: domain.CloseMarket}); err != nil {
		t.Fatalf("closing the event after the sweep: %v", err)
	}
}

// TestCloserGoesOnPastAFailure: a market the closer cannot close (here one whose shard is another
// process) does not keep the markets due after it open; the error names it, and the others close.
func TestCloserGoesOnPastAFailure(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "here")
	closes := time.Now().Add(time.Hour)
	var markets []records.Market
	for i, owner := range []string{"elsewhere", "here", "here"} {
		at := closes.Add(time.Duration(i) * time.Minute) // closed in this order
		m, err := f.st.CreateMarket(ctx, records.Market{ID: uuid.New(), Question: "closing", Category: "c",
			LabelA: "Yes", LabelB: "No", CreatedAt: time.Now(), ClosesAt: &at})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.Assign(ctx, m.ID, owner); err != nil {
			t.Fatal(err)
		}
		markets = append(markets, m)
	}
	err := (&market.Closer{Store: f.st, Target: s}).CloseDue(ctx, closes.Add(time.Hour))
	if !errors.Is(err, exchange.ErrNotOwner) {
		t.Errorf("closing a market another shard owns: %v, want %v", err, exchange.ErrNotOwner)
	}
	for i, m := range markets {
		got, err := f.st.Market(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := domain.MarketClosed
		if i == 0 {
			want = domain.MarketOpen
		}
		if got.Status != want {
			t.Errorf("market %d is %s after its closesAt, want %s", i, got.Status, want)
		}
	}
}
