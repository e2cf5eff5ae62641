package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// groupOrder is a placement of a group test: alice's BUY YES into the group (unless free), or, when
// taker, bob's BUY NO that meets alice's bids.
type groupOrder struct {
	taker bool
	free  bool // alice's, in no group
	price int
	qty   int64
}

func (f *fixture) groupPlace(t *testing.T, s *Shard, market, group uuid.UUID, o groupOrder) (records.PlacedOrder, error) {
	t.Helper()
	r := exchange.PlaceRequest{Account: f.alice, Market: market, Side: engine.Buy, Outcome: engine.Yes, Price: o.price, Quantity: o.qty}
	switch {
	case o.taker:
		r.Account, r.Outcome = f.bob, engine.No
	case !o.free:
		r.OrderGroupID = group
	}
	return s.Place(context.Background(), r)
}

// orderRow reads an order as committed.
func (f *fixture) orderRow(t *testing.T, id uuid.UUID) records.Order {
	t.Helper()
	o, err := f.st.Order(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

var (
	inGroup = func(price int, qty int64) groupOrder { return groupOrder{price: price, qty: qty} }
	free    = func(price int, qty int64) groupOrder { return groupOrder{free: true, price: price, qty: qty} }
	take    = func(price int, qty int64) groupOrder { return groupOrder{taker: true, price: price, qty: qty} }
)

// TestOrderGroupRule is the rule case by case: the orders are placed in turn in one market, with a
// group of fillLimit; then the group's fills, whether it is triggered, and which of alice's orders
// still rest.
func TestOrderGroupRule(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fillLimit int64
		orders    []groupOrder
		filled    int64
		triggered bool
		resting   []int // indexes into orders of alice's orders resting at the end
	}{
		{"below the limit", 10, []groupOrder{inGroup(40, 20), take(60, 9)}, 9, false, []int{0}},
		{"at the limit", 10, []groupOrder{inGroup(40, 20), take(60, 10)}, 10, true, nil},
		{"in two steps", 10, []groupOrder{inGroup(40, 20), take(60, 6), take(60, 4)}, 10, true, nil},
		{"the crossing order completes", 10, []groupOrder{inGroup(40, 20), take(60, 8), take(60, 5)}, 13, true, nil},
		{"every order of the group leaves", 5, []groupOrder{inGroup(40, 5), inGroup(30, 9), inGroup(20, 9), take(60, 5)}, 5, true, nil},
		{"an order in no group stays", 5, []groupOrder{inGroup(40, 5), free(30, 4), take(60, 5)}, 5, true, []int{1}},
		{"fills of orders in no group do not count", 5, []groupOrder{free(40, 10), inGroup(30, 5), take(60, 10)}, 0, false, []int{1}},
		{"a taker in the group counts", 5, []groupOrder{take(60, 5), inGroup(40, 8)}, 5, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.shard(t, "")
			ctx := context.Background()
			g, err := f.st.CreateOrderGroup(ctx, f.alice, tc.fillLimit, 3600, 1000)
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]uuid.UUID, len(tc.orders))
			for i, o := range tc.orders {
				p, err := f.groupPlace(t, s, f.market, g.ID, o)
				if err != nil {
					t.Fatalf("placing %+v: %v", o, err)
				}
				ids[i] = p.ID
			}
			got, err := f.st.OrderGroupOf(ctx, f.alice, g.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Filled != tc.filled || (got.TriggeredAt != nil) != tc.triggered {
				t.Errorf("the group: %d filled, triggered at %v; want %d filled, triggered %v", got.Filled, got.TriggeredAt, tc.filled, tc.triggered)
			}
			resting := map[int]bool{}
			for _, i := range tc.resting {
				resting[i] = true
			}
			for i, o := range tc.orders {
				if o.taker {
					continue
				}
				row := f.orderRow(t, ids[i])
				if row.Status.Resting() != resting[i] {
					t.Errorf("order %d (%+v): %s, want resting %v", i, o, row.Status, resting[i])
				}
				if !row.Status.Resting() && row.Status != engine.StatusFilled && (row.CancelReason == nil || *row.CancelReason != "ORDER_GROUP") {
					t.Errorf("order %d (%+v) left as %s, reason %v, want ORDER_GROUP", i, o, row.Status, row.CancelReason)
				}
			}
			if tc.triggered {
				if _, err := f.groupPlace(t, s, f.market, g.ID, inGroup(10, 1)); !errors.Is(err, domain.ErrOrderGroupTriggered) {
					t.Errorf("a placement into the triggered group: %v, want order_group_triggered", err)
				}
			}
			f.checkLocked(t, f.alice, f.bob)
		})
	}
}

// TestOrderGroupRefusals: a group that is not the account's is not found, as no group is; a
// triggered one refuses until reset, and the reset forgets the fills counted; fills older than the
// window do not count.
func TestOrderGroupRefusals(t *testing.T) {
	f := newFixture(t)
	s := f.shard(t, "")
	ctx := context.Background()
	bobs, err := f.st.CreateOrderGroup(ctx, f.bob, 5, 60, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uuid.UUID{uuid.New(), bobs.ID} {
		if _, err := f.groupPlace(t, s, f.market, id, inGroup(40, 1)); !errors.Is(err, domain.ErrOrderGroupNotFound) {
			t.Errorf("a placement into group %s: %v, want order_group_not_found", id, err)
		}
	}
	g, err := f.st.CreateOrderGroup(ctx, f.alice, 5, 60, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// Fills of two windows ago, as if the group's orders had filled then: they do not count.
	if _, err := f.st.Pool.Exec(ctx, `update order_groups set counted_from = now() - interval '1 hour' where id = $1;`, g.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Pool.Exec(ctx, `insert into order_group_fills (group_id, at, quantity) values ($1, now() - interval '2 minutes', 4)`, g.ID); err != nil {
		t.Fatal(err)
	}
	f.groupPlace(t, s, f.market, g.ID, inGroup(40, 10))
	if _, err := f.groupPlace(t, s, f.market, g.ID, take(60, 4)); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.st.OrderGroupOf(ctx, f.alice, g.ID); got.Filled != 4 || got.TriggeredAt != nil {
		t.Fatalf("4 filled in the window and 4 before it: %+v", got)
	}
	f.groupPlace(t, s, f.market, g.ID, take(60, 1))
	if _, err := f.groupPlace(t, s, f.market, g.ID, inGroup(40, 1)); !errors.Is(err, domain.ErrOrderGroupTriggered) {
		t.Fatalf("a placement into the triggered group: %v", err)
	}
	if _, err := f.st.ResetOrderGroup(ctx, f.alice, g.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.groupPlace(t, s, f.market, g.ID, inGroup(40, 4)); err != nil {
		t.Fatalf("a placement after the reset: %v", err)
	}
	if _, err := f.groupPlace(t, s, f.market, g.ID, take(60, 4)); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.st.OrderGroupOf(ctx, f.alice, g.ID); got.Filled != 4 || got.TriggeredAt != nil {
		t.Fatalf("after the reset, 4 filled of 5: %+v", got)
	}
}

// TestOrderGroupAcrossShards: a group triggered on one shard stops its orders on another — the
// next batch there that could fill one reads the group and cancels them first, and a shard that
// trades nothing cancels them with its group sweep.
func TestOrderGroupAcrossShards(t *testing.T) {
	f := newFixture(t)
	other, third := storetest.Market(t, f.st), storetest.Market(t, f.st)
	a, b := f.shard(t, ""), f.shard(t, "")
	ctx := context.Background()
	g, err := f.st.CreateOrderGroup(ctx, f.alice, 5, 60, 1000)
	if err != nil {
		t.Fatal(err)
	}
	onA, err := f.groupPlace(t, a, f.market, g.ID, inGroup(40, 10))
	if err != nil {
		t.Fatal(err)
	}
	onB, err := f.groupPlace(t, b, other, g.ID, inGroup(40, 10))
	if err != nil {
		t.Fatal(err)
	}
	swept, err := f.groupPlace(t, b, third, g.ID, inGroup(40, 10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.groupPlace(t, a, f.market, g.ID, take(60, 5)); err != nil { // triggers it on a
		t.Fatal(err)
	}
	if row := f.orderRow(t, onA.ID); row.Status != engine.StatusPartiallyFilledCancelled {
		t.Fatalf("the group's order on the shard that triggered it: %s", row.Status)
	}
	// b's next batch in other reads the group and cancels its order there before bob's meets it.
	took, err := f.groupPlace(t, b, other, g.ID, take(60, 5))
	if err != nil || took.FilledQuantity != 0 {
		t.Fatalf("bob's order on b filled %d of a triggered group's: %v", took.FilledQuantity, err)
	}
	if row := f.orderRow(t, onB.ID); row.Status != engine.StatusCancelled || row.CancelReason == nil || *row.CancelReason != "ORDER_GROUP" {
		t.Fatalf("the group's order on b: %s %v", row.Status, row.CancelReason)
	}
	// Every order of the group on b went in that batch, in every market b holds; the sweep
	// would have found it otherwise.
	poll.Wait(t, 10*time.Second, "the sweep to cancel the group's order in the third market", func() bool {
		return !f.orderRow(t, swept.ID).Status.Resting()
	})
	if got, _ := f.st.OrderGroupOf(ctx, f.alice, g.ID); got.Filled != 5 {
		t.Errorf("the group filled %d, want 5", got.Filled)
	}
	f.checkLocked(t, f.alice, f.bob)
}

// TestOrderGroupSweep: a shard that trades nothing cancels the resting orders of a group another
// shard triggered within about groupSweep.
func TestOrderGroupSweep(t *testing.T) {
	f := newFixture(t)
	other := storetest.Market(t, f.st)
	a, b := f.shard(t, ""), f.shard(t, "")
	ctx := context.Background()
	g, err := f.st.CreateOrderGroup(ctx, f.alice, 5, 60, 1000)
	if err != nil {
		t.Fatal(err)
	}
	f.groupPlace(t, a, f.market, g.ID, inGroup(40, 10))
	idle, err := f.groupPlace(t, b, other, g.ID, inGroup(40, 10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.groupPlace(t, a, f.market, g.ID, take(60, 5)); err != nil {
		t.Fatal(err)
	}
	poll.Wait(t, 10*groupSweep, "the idle shard's sweep to cancel the group's order", func() bool {
		return !f.orderRow(t, idle.ID).Status.Resting()
	})
	if row := f.orderRow(t, idle.ID); row.CancelReason == nil || *row.CancelReason != "ORDER_GROUP" {
		t.Fatalf("the idle shard's order left as %s %v", row.Status, row.CancelReason)
	}
	f.checkLocked(t, f.alice)
}

// TestOrderGroupExpiry: store.ExpireOrderGroups deletes the groups with no open order in which
// nothing happened since its cutoff — idle ones, and triggered ones whose orders the trigger
// cancelled — and keeps those with an open order or something newer; a placement into a deleted
// group is refused as naming no group. The cutoff stands for the clock: a cutoff an hour ahead
// makes every group an hour older than the rule.
func TestOrderGroupExpiry(t *testing.T) {
	f := newFixture(t)
	s := f.shard(t, "")
	ctx := context.Background()
	group := func() uuid.UUID {
		g, err := f.st.CreateOrderGroup(ctx, f.alice, 5, 60, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return g.ID
	}
	idle, triggered, resting, filled := group(), group(), group(), group()
	if _, err := f.groupPlace(t, s, f.market, triggered, inGroup(40, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.groupPlace(t, s, f.market, triggered, take(60, 5)); err != nil { // triggers it, cancels nothing left
		t.Fatal(err)
	}
	if _, err := f.groupPlace(t, s, f.market, resting, inGroup(30, 1)); err != nil {
		t.Fatal(err)
	}
	if n, err := f.st.ExpireOrderGroups(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("expiring groups idle since an hour ago, all made just now: %d, %v", n, err)
	}
	// Nothing happened in filled for a day, but an order of it fills now.
	if _, err := f.st.Pool.Exec(ctx, `update order_groups set active_at = now() - interval '25 hours' where id = $1`, filled); err != nil {
		t.Fatal(err)
	}
	if _, err := f.groupPlace(t, s, f.market, filled, inGroup(50, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.groupPlace(t, s, f.market, filled, take(50, 1)); err != nil {
		t.Fatal(err)
	}
	if n, err := f.st.ExpireOrderGroups(ctx, time.Now().Add(-store.OrderGroupIdle)); err != nil || n != 0 {
		t.Fatalf("expiring groups past the rule when none is: %d, %v", n, err)
	}
	n, err := f.st.ExpireOrderGroups(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("expired %d groups, want 3 (idle, triggered, filled)", n)
	}
	for id, kept := range map[uuid.UUID]bool{idle: false, triggered: false, filled: false, resting: true} {
		if _, err := f.st.OrderGroupOf(ctx, f.alice, id); (err == nil) != kept {
			t.Errorf("group %s after the expiry: %v, want kept %v", id, err, kept)
		}
	}
	if _, err := f.groupPlace(t, s, f.market, idle, inGroup(40, 1)); !errors.Is(err, domain.ErrOrderGroupNotFound) {
		t.Errorf("a placement into an expired group: %v, want order_group_not_found", err)
	}
	if _, err := f.groupPlace(t, s, f.market, resting, inGroup(40, 1)); err != nil {
		t.Errorf("a placement into the group kept by its open order: %v", err)
	}
	f.checkLocked(t, f.alice, f.bob)
}

// TestOrderGroupReadsDoNotGrow parks 1,000 grouped one-cent bids (1,000 groups) in a market and
// counts the groups other accounts' placements there read: none, as with no group parked (issue
// 51: each batch read every one of them, with a sum over its fills). A shard that loads the market
// afresh reads them once, with its first batch there, and then no more. The timing is
// BenchmarkPlaceBesideParkedGroups's.
func TestOrderGroupReadsDoNotGrow(t *testing.T) {
	f := newFixture(t)
	s := f.shard(t, "")
	ctx := context.Background()
	const parked, placements = 1000, 20
	for range parked {
		g, err := f.st.CreateOrderGroup(ctx, f.alice, 1_000_000, 3600, parked)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.groupPlace(t, s, f.market, g.ID, inGroup(1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	// bob's bids, below none of alice's and crossing none: each a batch of its own.
	reads := func(s *Shard) float64 {
		before := testutil.ToFloat64(s.metrics.groupsRead)
		for range placements {
			if _, err := s.Place(ctx, f.buy(f.bob, engine.Yes, 2, 1)); err != nil {
				t.Fatal(err)
			}
		}
		return testutil.ToFloat64(s.metrics.groupsRead) - before
	}
	if n := reads(s); n != 0 {
		t.Errorf("%d placements beside %d parked groups read %v groups, want none", placements, parked, n)
	}
	s.Stop()
	again := f.shard(t, "")
	if n := reads(again); n != parked {
		t.Errorf("a shard that loads the market afresh: %d placements read %v groups, want the %d parked ones once", placements, n, parked)
	}
	if n := reads(again); n != 0 {
		t.Errorf("then %d more placements read %v groups, want none", placements, n)
	}
	// The groups are still decided: bob's taker fills a parked bid, its group counts it.
	if _, err := again.Place(ctx, exchange.PlaceRequest{Account: f.bob, Market: f.market, Side: engine.Buy, Outcome: engine.No, Price: 99, Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	var filled int64
	if err := f.st.Pool.QueryRow(ctx, `select coalesce(sum(quantity), 0) from order_group_fills`).Scan(&filled); err != nil || filled != 1 {
		t.Errorf("the parked groups counted %d shares filled, want 1 (%v)", filled, err)
	}
	f.checkLocked(t, f.alice, f.bob)
}

// BenchmarkPlaceBesideParkedGroups times another account's placements, one batch each, in a
// market where no order group rests and in one where 1,000 grouped one-cent bids do (issue 51:
// 0.84× the throughput when each batch read every parked group).
func BenchmarkPlaceBesideParkedGroups(b *testing.B) {
	for _, parked := range []int{0, 1000} {
		b.Run(fmt.Sprintf("parked=%d", parked), func(b *testing.B) {
			st := storetest.New(b)
			f := &fixture{st: st, market: storetest.Market(b, st), alice: storetest.Account(b, st, "alice", 100_000),
				bob: storetest.Account(b, st, "bob", 1_000_000_000)}
			s := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxOpenOrders: 1 << 20})
			b.Cleanup(s.Stop)
			ctx := context.Background()
			for range parked {
				g, err := st.CreateOrderGroup(ctx, f.alice, 1_000_000, 3600, parked)
				if err != nil {
					b.Fatal(err)
				}
				r := f.buy(f.alice, engine.Yes, 1, 1)
				r.OrderGroupID = g.ID
				if _, err := s.Place(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				if _, err := s.Place(ctx, f.buy(f.bob, engine.Yes, 2, 1)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
