package shard

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// TestHandoff hands a market from shard A to shard B while commands for it queue on A: those taken
// before the handoff commit on A, the handoff then moves the market under the next epoch, those
// taken after it are refused with ErrHandedOver and nothing done; B, told to take the market over,
// loads it with A's resting orders and trades on it. A can hand over only what it holds under the
// epoch Postgres records.
func TestHandoff(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.shard(t, "shard-a"), f.shard(t, "shard-b")
	for _, name := range []string{"shard-a", "shard-b"} { // a handoff goes only to a live shard
		if _, err := f.st.Register(ctx, name, name+":8090", ""); err != nil {
			t.Fatal(err)
		}
	}
	before, err := f.st.Assign(ctx, f.market, "shard-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Place(ctx, f.buy(f.alice, engine.Yes, 40, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.HandOff(ctx, []uuid.UUID{f.market}, "shard-c"); !errors.Is(err, exchange.ErrNotOwner) {
		t.Fatalf("a shard handed over a market it does not own: %v", err)
	}

	// Hold A's loop inside a batch (its reservation waits for a lock the test holds), so that a
	// placement, the handoff and another placement queue behind it, in that order.
	tx := lockTable(t, f.st, "accounts")
	placed := make(chan error, 3)
	go func() { _, err := a.Place(ctx, f.buy(f.bob, engine.Yes, 41, 1)); placed <- err }()
	waitBlocked(t, f.st)
	go func() { _, err := a.Place(ctx, f.buy(f.bob, engine.Yes, 42, 1)); placed <- err }()
	waitQueued(t, a, 1)
	handed := make(chan error, 1)
	var epochs []int64
	go func() {
		var err error
		epochs, err = a.HandOff(ctx, []uuid.UUID{f.market}, "shard-b")
		handed <- err
	}()
	waitQueued(t, a, 2)
	var after error
	afterDone := make(chan struct{})
	go func() { _, after = a.Place(ctx, f.buy(f.bob, engine.Yes, 43, 1)); close(afterDone) }()
	waitQueued(t, a, 3)
	n := orderCount(t, f.st)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-placed; err != nil {
			t.Errorf("a placement taken before the handoff: %v", err)
		}
	}
	if err := <-handed; err != nil {
		t.Fatalf("handoff: %v", err)
	}
	<-afterDone
	if !errors.Is(after, exchange.ErrHandedOver) || !errors.Is(after, exchange.ErrNotOwner) {
		t.Errorf("a placement taken after the handoff: %v, want ErrHandedOver (an ErrNotOwner)", after)
	}
	if got := orderCount(t, f.st); got != n+2 {
		t.Errorf("%d orders after the handoff, want %d: the two taken before it", got, n+2)
	}
	o, err := f.st.Owner(ctx, f.market)
	if err != nil || o.Shard != "shard-b" || o.Epoch != before.Epoch+1 || len(epochs) != 1 || epochs[0] != o.Epoch {
		t.Fatalf("after the handoff: owner %+v (%v), epochs answered %v; want shard-b at %d", o, err, epochs, before.Epoch+1)
	}
	if _, err := a.HandOff(ctx, []uuid.UUID{f.market}, "shard-b"); !errors.Is(err, exchange.ErrNotOwner) {
		t.Errorf("the old owner handed the market over again: %v", err)
	}

	if err := b.TakeOver(ctx, []uuid.UUID{f.market}, epochs); err != nil {
		t.Fatal(err)
	}
	if snap, ok := b.snapshot(f.market); !ok || snap.Epoch != o.Epoch {
		t.Fatalf("the new owner has not loaded the market under epoch %d: %+v", o.Epoch, snap)
	}
	// A heartbeat that read B's markets before the handoff and syncs after it leaves the market
	// alone: it was loaded after the read.
	if err := b.do(ctx, &command{kind: cmdSync, readAt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.snapshot(f.market); !ok {
		t.Fatal("a heartbeat's sync of what it read before the handoff dropped the market handed over")
	}
	// B trades against the two bids A committed before the handoff (the one at 43 was never placed).
	got, err := b.Place(ctx, f.buy(f.alice, engine.No, 100-41, 3))
	if err != nil || got.FilledQuantity != 2 {
		t.Fatalf("the new owner's crossing order: %+v, %v", got, err)
	}
	if err := b.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
	f.checkLocked(t, f.alice, f.bob)

	// Back to A, which loads it afresh under the next epoch when told to take it over.
	back, err := b.HandOff(ctx, []uuid.UUID{f.market}, "shard-a")
	if err != nil || back[0] != o.Epoch+1 {
		t.Fatalf("handing back: epochs %v, %v", back, err)
	}
	if err := a.TakeOver(ctx, []uuid.UUID{f.market}, back); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Place(ctx, f.buy(f.alice, engine.Yes, 30, 1)); err != nil {
		t.Errorf("the first owner, handed the market back: %v", err)
	}
	if err := a.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNumbersAfterAHandoff: an amend that moves an order gives it the next number of its market's
// order sequence, which no order may take after it, even once the moved order has ended and the
// market has changed shards. The new owner's first order must take the number after it: a number
// held twice makes the market's history ambiguous (pmx audit reports it as a numbering
// difference, and replays the market wrong). Before the fix, the new owner counted only the
// priorities of resting orders and gave the next order the ended order's number.
func TestNumbersAfterAHandoff(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.shard(t, "shard-a"), f.shard(t, "shard-b")
	for _, name := range []string{"shard-a", "shard-b"} {
		if _, err := f.st.Register(ctx, name, name+":8090", ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.st.Assign(ctx, f.market, "shard-a"); err != nil {
		t.Fatal(err)
	}
	first, err := a.Place(ctx, f.buy(f.alice, engine.Yes, 40, 5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Place(ctx, f.buy(f.bob, engine.Yes, 41, 5)); err != nil {
		t.Fatal(err)
	}
	// A new price moves it to the back: number 3. Then it ends.
	if _, err := a.Amend(ctx, exchange.AmendRequest{Account: f.alice, Market: f.market, Seq: first.Seq, Side: engine.Buy,
		Outcome: engine.Yes, Price: 42, Remaining: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Cancel(ctx, exchange.CancelRequest{Account: f.alice, Market: f.market, Seq: first.Seq}); err != nil {
		t.Fatal(err)
	}
	var priority int64
	if err := f.st.Pool.QueryRow(ctx, `select priority from orders where id = $1`, first.ID).Scan(&priority); err != nil || priority != 3 {
		t.Fatalf("the amended order's priority is %d (%v), want 3, the next number after the two orders", priority, err)
	}

	epochs, err := a.HandOff(ctx, []uuid.UUID{f.market}, "shard-b")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.TakeOver(ctx, []uuid.UUID{f.market}, epochs); err != nil {
		t.Fatal(err)
	}
	next, err := b.Place(ctx, f.buy(f.bob, engine.Yes, 30, 1))
	if err != nil {
		t.Fatal(err)
	}
	if next.Seq != 4 {
		t.Errorf("the new owner's first order took number %d of the order sequence, want 4: number 3 is the ended order's priority", next.Seq)
	}
	var twice int
	if err := f.st.Pool.QueryRow(ctx, `select count(*) from (select n from (
			select seq as n from orders where market_id = $1
			union all select priority from orders where market_id = $1 and priority is not null) u
		group by n having count(*) > 1) d`, f.market).Scan(&twice); err != nil {
		t.Fatal(err)
	}
	if twice > 0 {
		t.Errorf("%d numbers of the market's order sequence are held twice", twice)
	}
	if err := b.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}
