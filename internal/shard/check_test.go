package shard

import (
	"context"
	"testing"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// TestCheckBooksAfterAmendedOrderEnds amends an order to a new price (a new time priority, the
// next number of the order sequence) and then cancels it: no resting order holds that number any
// more, so a rebuild's counter is behind the shard's, and the check must accept that, before and
// after a restart, while it still refuses a counter outside what Postgres allows.
func TestCheckBooksAfterAmendedOrderEnds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	placed, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 40, 10))
	if err != nil {
		t.Fatal(err)
	}
	seq := placed.Order.Seq
	if _, err := s.Amend(ctx, exchange.AmendRequest{Account: f.alice, Market: f.market, Seq: seq, Side: engine.Buy,
		Outcome: engine.Yes, Price: 41, Remaining: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, exchange.CancelRequest{Account: f.alice, Market: f.market, Seq: seq}); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatalf("after an amended order ended: %v", err)
	}
	// Without the amend's number in Postgres, the shard's counter is past every number used: a
	// real difference.
	if _, err := f.st.Pool.Exec(ctx, `update orders set priority = null where market_id = $1`, f.market); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckBooks(ctx); err == nil {
		t.Fatal("a counter past every order number used passed the check")
	}
	if _, err := f.st.Pool.Exec(ctx, `update orders set priority = $2 where market_id = $1 and seq = $3`, f.market, seq+1, seq); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	restarted := f.shard(t, "")
	if _, err := restarted.Place(ctx, f.buy(f.bob, engine.No, 50, 5)); err != nil {
		t.Fatal(err)
	}
	if err := restarted.CheckBooks(ctx); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}
