package shard

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
)

// setFixture is the fixture's database with four more markets, served by a Set of two shards.
func setFixture(t *testing.T) (*fixture, *Set, []uuid.UUID) {
	t.Helper()
	f := newFixture(t)
	ctx := context.Background()
	var markets []uuid.UUID
	for i := range 4 {
		m, err := f.st.CreateMarket(ctx, records.Market{ID: uuid.New(), Question: "q" + string(rune('a'+i)), Category: "c",
			LabelA: "Yes", LabelB: "No", CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		markets = append(markets, m.ID)
	}
	set := NewSet(Config{Store: f.st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, 2)
	t.Cleanup(set.Stop)
	for _, id := range markets {
		if _, err := set.OrderBook(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	return f, set, markets
}

// TestSetSpreadsMarkets checks that the set gives the markets out evenly and that each shard
// holds only its own.
func TestSetSpreadsMarkets(t *testing.T) {
	_, set, markets := setFixture(t)
	for i, id := range markets {
		want := i % 2 // handed out in turn, the least busy shard first
		if got, err := set.of(t.Context(), id); err != nil || got != want {
			t.Errorf("market %d is on shard %d (%v), want %d", i, got, err, want)
		}
		for s, sh := range set.shards {
			if _, held := sh.snapshot(id); held != (s == want) {
				t.Errorf("shard %d holds market %d: %v", s, i, held)
			}
		}
	}
	if _, err := set.Place(t.Context(), exchange.PlaceRequest{Account: 1, Market: uuid.New(), Side: engine.Buy, Outcome: engine.Yes, Price: 1, Quantity: 1}); !errors.Is(err, domain.ErrUnknownMarket) {
		t.Fatalf("a placement in a market that does not exist: %v, want %v", err, domain.ErrUnknownMarket)
	}
	set.mu.Lock()
	n := len(set.owner)
	set.mu.Unlock()
	if n != len(markets) {
		t.Errorf("the set remembers %d markets, want %d: the made-up one was kept", n, len(markets))
	}
}

// TestSetCallsAcrossShards places, cancels and cancels everything of one account across markets
// on both shards, and checks each answer comes back in the caller's order.
func TestSetCallsAcrossShards(t *testing.T) {
	f, set, markets := setFixture(t)
	ctx := context.Background()
	var rs []exchange.PlaceRequest
	for i, id := range append(markets, markets...) {
		rs = append(rs, exchange.PlaceRequest{Account: f.alice, Market: id, Side: engine.Buy, Outcome: engine.Yes, Price: 10 + i, Quantity: 1})
	}
	placed := set.PlaceMany(ctx, rs)
	for i, p := range placed {
		if p.Err != nil || p.Placed.MarketID != rs[i].Market || p.Placed.Price != rs[i].Price {
			t.Fatalf("placement %d: %+v, want its market and price %d", i, p, rs[i].Price)
		}
	}
	cancels := []exchange.CancelRequest{
		{Account: f.alice, Market: markets[3], Seq: placed[3].Placed.Seq},
		{Account: f.alice, Market: markets[0], Seq: placed[0].Placed.Seq},
	}
	for i, c := range set.CancelMany(ctx, cancels) {
		if c.Err != nil || c.Order.MarketID != cancels[i].Market || c.Order.Seq != cancels[i].Seq {
			t.Fatalf("cancel %d: %+v", i, c)
		}
	}
	order := []uuid.UUID{markets[2], markets[1], markets[0], markets[3]}
	all, err := set.CancelAll(ctx, f.alice, order)
	if err != nil || len(all) != 6 {
		t.Fatalf("cancel everything: %d orders, %v; want the 6 still open", len(all), err)
	}
	pos := map[uuid.UUID]int{}
	for i, id := range order {
		pos[id] = i
	}
	for i := 1; i < len(all); i++ {
		if pos[all[i].MarketID] < pos[all[i-1].MarketID] {
			t.Fatalf("cancel everything answered the markets out of the order asked: %v", all)
		}
	}
	if available, locked := f.cash(t, f.alice); available != 100_000 || locked != 0 {
		t.Errorf("alice has %d available and %d locked after cancelling everything, want 100000 and 0", available, locked)
	}
	if err := set.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSetSharedAccounts has two accounts trade at once in four markets on two shards — each
// shard reserving their cash from its own views, which the other shard's trades put out of date —
// with balances small enough that placements are refused for want of funds. At the end, no cash
// was made or lost, each account's locked cash is what its open orders need, every market has as
// many YES shares as NO, and the books equal Postgres.
func TestSetSharedAccounts(t *testing.T) {
	f, set, markets := setFixture(t)
	ctx := context.Background()
	const grant = 3_000
	if _, err := f.st.Pool.Exec(ctx, `update accounts set available = $1, granted = $1 where id = any($2)`, grant, []int64{f.alice, f.bob}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		account := []int64{f.alice, f.bob}[g%2]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var open []records.PlacedOrder
			for range 40 {
				m := markets[rng.IntN(len(markets))]
				if len(open) > 0 && rng.IntN(3) == 0 {
					o := open[rng.IntN(len(open))]
					_, _ = set.Cancel(ctx, exchange.CancelRequest{Account: account, Market: o.MarketID, Seq: o.Seq})
					continue
				}
				outcome := []engine.Outcome{engine.Yes, engine.No}[rng.IntN(2)]
				p, err := set.Place(ctx, exchange.PlaceRequest{Account: account, Market: m, Side: engine.Buy, Outcome: outcome,
					Price: 30 + rng.IntN(40), Quantity: 1 + int64(rng.IntN(8))})
				if err == nil && p.Status.Resting() {
					open = append(open, p)
				}
			}
		})
	}
	wg.Wait()

	var cash, pairs int64
	if err := f.st.Pool.QueryRow(ctx, `select sum(available + locked) from account_balances`).Scan(&cash); err != nil {
		t.Fatal(err)
	}
	for _, m := range markets {
		var yes, no int64
		if err := f.st.Pool.QueryRow(ctx, `select coalesce(sum(quantity) filter (where outcome = 'YES'), 0),
			coalesce(sum(quantity) filter (where outcome = 'NO'), 0) from positions where market_id = $1`, m).Scan(&yes, &no); err != nil {
			t.Fatal(err)
		}
		if yes != no {
			t.Errorf("market %s has %d YES shares and %d NO", m, yes, no)
		}
		pairs += yes
	}
	if cash+100*pairs != 2*grant {
		t.Errorf("%d cents in accounts and %d share pairs (worth %d): %d in all, want the %d granted", cash, pairs, 100*pairs, cash+100*pairs, 2*grant)
	}
	f.checkLocked(t, f.alice, f.bob)
	var refused float64
	for _, s := range set.shards {
		refused += rerun(t, s)
	}
	t.Logf("%v batches ran again, reading what they reserve from", refused)
	if err := set.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNamedSet runs one named shard process as a Set of two: the markets Postgres assigns to the
// process are spread over both, each places only in its own, and a market moved to another
// process is fenced off as for a single named shard.
func TestNamedSet(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var markets []uuid.UUID
	for i := range 2 {
		m, err := f.st.CreateMarket(ctx, records.Market{ID: uuid.New(), Question: "n" + string(rune('a'+i)), Category: "c",
			LabelA: "Yes", LabelB: "No", CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.Assign(ctx, m.ID, "proc-a"); err != nil {
			t.Fatal(err)
		}
		markets = append(markets, m.ID)
	}
	set := NewSet(Config{Store: f.st, Name: "proc-a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, 2)
	t.Cleanup(set.Stop)
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		set.Run(runCtx, Registration{Address: "127.0.0.1:1", Interval: 50 * time.Millisecond})
	}()
	t.Cleanup(func() { stopRun(); <-ran })

	// The heartbeat's sync loads each market on its own shard.
	poll.Wait(t, 10*time.Second, "both markets loaded", func() bool {
		for _, id := range markets {
			if _, ok := set.shards[set.assign(id)].snapshot(id); !ok {
				return false
			}
		}
		return true
	})
	if set.assign(markets[0]) == set.assign(markets[1]) {
		t.Errorf("both markets are on shard %d", set.assign(markets[0]))
	}
	for _, id := range markets {
		if _, err := set.Place(ctx, exchange.PlaceRequest{Account: f.alice, Market: id, Side: engine.Buy, Outcome: engine.Yes, Price: 40, Quantity: 1}); err != nil {
			t.Fatalf("placing in market %s: %v", id, err)
		}
	}
	if _, err := f.st.Assign(ctx, markets[1], "proc-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := set.Place(ctx, exchange.PlaceRequest{Account: f.alice, Market: markets[1], Side: engine.Buy, Outcome: engine.Yes, Price: 41, Quantity: 1}); !errors.Is(err, exchange.ErrNotOwner) {
		t.Fatalf("placing in a market moved away: %v, want %v", err, exchange.ErrNotOwner)
	}
	if _, err := set.Place(ctx, exchange.PlaceRequest{Account: f.alice, Market: markets[0], Side: engine.Buy, Outcome: engine.Yes, Price: 41, Quantity: 1}); err != nil {
		t.Fatalf("placing in the market still here: %v", err)
	}
	if err := set.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}
