package shard

// The scenario tests drive a standalone shard through its real code path — its loop, batches,
// views, matching, risk checks and commits — on the memory store (scenario_memory_test.go)
// instead of Postgres: they need no database, start in microseconds and check the engine-level
// logic (what the books, orders, cash and holdings become) scenario by scenario. The tests on
// storetest (shard_test.go and the others) check the same shard against the real SQL, with its
// settlements, events, order groups and ownership, which the memory store leaves out.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// scenario is a memory store with one OPEN market, two accounts funded with 10,000 cents each,
// and a standalone shard on them.
type scenario struct {
	mem          *memoryStore
	market       uuid.UUID
	alice, bob   int64
	shard        *Shard
	t            *testing.T
	ctx          context.Context
	startingCash int64
}

func newScenario(t *testing.T) *scenario {
	t.Helper()
	sc := &scenario{mem: newMemoryStore(), alice: 1, bob: 2, t: t, ctx: context.Background(), startingCash: 10_000}
	sc.market = sc.mem.addMarket()
	sc.mem.addAccount(sc.alice, sc.startingCash)
	sc.mem.addAccount(sc.bob, sc.startingCash)
	sc.shard = sc.start()
	return sc
}

// start starts a shard on the scenario's memory store, stopped when the test ends.
func (sc *scenario) start() *Shard {
	s := New(Config{Store: sc.mem, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	sc.t.Cleanup(s.Stop)
	return s
}

// place places an order, and returns its number in the market if it was accepted.
func (sc *scenario) place(account int64, side engine.Side, outcome engine.Outcome, price int, qty int64) (int64, error) {
	placed, err := sc.shard.Place(sc.ctx, exchange.PlaceRequest{Account: account, Market: sc.market, Side: side, Outcome: outcome, Price: price, Quantity: qty})
	return placed.Seq, err
}

// mustPlace places an order that must be accepted, and returns its number in the market.
func (sc *scenario) mustPlace(account int64, side engine.Side, outcome engine.Outcome, price int, qty int64) int64 {
	sc.t.Helper()
	placed, err := sc.shard.Place(sc.ctx, exchange.PlaceRequest{Account: account, Market: sc.market, Side: side, Outcome: outcome, Price: price, Quantity: qty})
	if err != nil {
		sc.t.Fatalf("placing %v %v %d×%d for account %d: %v", side, outcome, qty, price, account, err)
	}
	return placed.Seq
}

// checkCash checks an account's available and locked cash in the store.
func (sc *scenario) checkCash(account, available, locked int64) {
	sc.t.Helper()
	if a, l := sc.mem.cash(account); a != available || l != locked {
		sc.t.Errorf("account %d has %d available, %d locked; want %d, %d", account, a, l, available, locked)
	}
}

// checkPosition checks the shares an account holds of an outcome, and how many are locked.
func (sc *scenario) checkPosition(account int64, outcome engine.Outcome, quantity, locked int64) {
	sc.t.Helper()
	if q, l := sc.mem.position(account, sc.market, outcome); q != quantity || l != locked {
		sc.t.Errorf("account %d holds %d %v shares, %d locked; want %d, %d", account, q, outcome, l, quantity, locked)
	}
}

// checkOrder checks an order's status and filled quantity in the store.
func (sc *scenario) checkOrder(seq int64, status engine.Status, filled int64) {
	sc.t.Helper()
	o, err := sc.mem.OrderBySeq(sc.ctx, sc.market, seq)
	if err != nil {
		sc.t.Fatalf("order %d: %v", seq, err)
	}
	if o.Status != status || o.FilledQuantity != filled {
		sc.t.Errorf("order %d is %v with %d filled; want %v with %d", seq, o.Status, o.FilledQuantity, status, filled)
	}
}

// checkBook checks the YES bids and asks of the committed book, as (price, quantity) levels.
func (sc *scenario) checkBook(bids, asks [][2]int64) {
	sc.t.Helper()
	snap, err := sc.shard.OrderBook(sc.ctx, sc.market)
	if err != nil {
		sc.t.Fatal(err)
	}
	levels := func(ls []engine.Level) [][2]int64 {
		out := [][2]int64{}
		for _, l := range ls {
			out = append(out, [2]int64{int64(l.Price), l.Quantity})
		}
		return out
	}
	got := [2][][2]int64{levels(snap.Depth.Yes.Bids), levels(snap.Depth.Yes.Asks)}
	want := [2][][2]int64{bids, asks}
	if bids == nil {
		want[0] = [][2]int64{}
	}
	if asks == nil {
		want[1] = [][2]int64{}
	}
	if len(got[0]) != len(want[0]) || len(got[1]) != len(want[1]) {
		sc.t.Errorf("book is bids %v, asks %v; want %v, %v", got[0], got[1], want[0], want[1])
		return
	}
	for i := range 2 {
		for j := range got[i] {
			if got[i][j] != want[i][j] {
				sc.t.Errorf("book is bids %v, asks %v; want %v, %v", got[0], got[1], want[0], want[1])
				return
			}
		}
	}
}

// A buy of YES and a buy of NO whose prices add up to the payout cross: both fill, the shares are
// minted, the cash each paid leaves its account, and the book is empty.
func TestScenarioCrossMints(t *testing.T) {
	sc := newScenario(t)
	yes := sc.mustPlace(sc.alice, engine.Buy, engine.Yes, 60, 10)
	sc.checkCash(sc.alice, sc.startingCash-600, 600)
	sc.checkBook([][2]int64{{60, 10}}, nil)
	no := sc.mustPlace(sc.bob, engine.Buy, engine.No, 40, 10)
	sc.checkOrder(yes, engine.StatusFilled, 10)
	sc.checkOrder(no, engine.StatusFilled, 10)
	sc.checkCash(sc.alice, sc.startingCash-600, 0)
	sc.checkCash(sc.bob, sc.startingCash-400, 0)
	sc.checkPosition(sc.alice, engine.Yes, 10, 0)
	sc.checkPosition(sc.bob, engine.No, 10, 0)
	sc.checkBook(nil, nil)
	if n := len(sc.mem.trades[sc.market]); n != 1 {
		t.Errorf("%d trades recorded, want 1", n)
	}
}

// A partial fill leaves the rest resting with its cash locked; cancelling it unlocks that cash,
// and the order is left partially filled and cancelled.
func TestScenarioPartialFillThenCancel(t *testing.T) {
	sc := newScenario(t)
	yes := sc.mustPlace(sc.alice, engine.Buy, engine.Yes, 50, 10)
	sc.mustPlace(sc.bob, engine.Buy, engine.No, 50, 4)
	sc.checkOrder(yes, engine.StatusPartiallyFilled, 4)
	sc.checkCash(sc.alice, sc.startingCash-500, 300)
	sc.checkBook([][2]int64{{50, 6}}, nil)

	o, err := sc.shard.Cancel(sc.ctx, exchange.CancelRequest{Account: sc.alice, Market: sc.market, Seq: yes})
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != engine.StatusPartiallyFilledCancelled || o.FilledQuantity != 4 {
		t.Errorf("cancel answered %v with %d filled, want PARTIALLY_FILLED_CANCELLED with 4", o.Status, o.FilledQuantity)
	}
	sc.checkOrder(yes, engine.StatusPartiallyFilledCancelled, 4)
	sc.checkCash(sc.alice, sc.startingCash-200, 0)
	sc.checkBook(nil, nil)

	// Another account may not cancel it, and it cannot be cancelled twice.
	if _, err := sc.shard.Cancel(sc.ctx, exchange.CancelRequest{Account: sc.bob, Market: sc.market, Seq: yes}); !errors.Is(err, domain.ErrNotYourOrder) && !errors.Is(err, domain.ErrOrderNotOpen) {
		t.Errorf("bob cancelling alice's order: %v, want not_your_order or order_not_open", err)
	}
	if _, err := sc.shard.Cancel(sc.ctx, exchange.CancelRequest{Account: sc.alice, Market: sc.market, Seq: yes}); !errors.Is(err, domain.ErrOrderNotOpen) {
		t.Errorf("cancelling a cancelled order: %v, want order_not_open", err)
	}
}

// A buy the account cannot pay for is refused, and nothing is locked or written for it; a sell of
// shares the account does not hold likewise.
func TestScenarioRefusesWhatCannotBePaid(t *testing.T) {
	sc := newScenario(t)
	if _, err := sc.place(sc.alice, engine.Buy, engine.Yes, 50, sc.startingCash/50+1); !errors.Is(err, domain.ErrInsufficientFunds) {
		t.Errorf("a buy over the account's cash: %v, want insufficient_funds", err)
	}
	if _, err := sc.place(sc.alice, engine.Sell, engine.Yes, 50, 1); !errors.Is(err, domain.ErrInsufficientShares) {
		t.Errorf("a sell of shares not held: %v, want insufficient_shares", err)
	}
	sc.checkCash(sc.alice, sc.startingCash, 0)
	sc.checkBook(nil, nil)
	if len(sc.mem.orders) != 0 {
		t.Errorf("%d orders written, want none", len(sc.mem.orders))
	}
}

// Shares bought can be sold: the sale locks them while it rests, and a buyer's fill moves them
// and the cash.
func TestScenarioSellHeldShares(t *testing.T) {
	sc := newScenario(t)
	sc.mustPlace(sc.alice, engine.Buy, engine.Yes, 60, 10)
	sc.mustPlace(sc.bob, engine.Buy, engine.No, 40, 10) // alice holds 10 YES, bob 10 NO
	sell := sc.mustPlace(sc.alice, engine.Sell, engine.Yes, 70, 5)
	sc.checkPosition(sc.alice, engine.Yes, 10, 5)
	sc.checkBook(nil, [][2]int64{{70, 5}})

	carol := int64(3)
	sc.mem.addAccount(carol, 1_000)
	sc.mustPlace(carol, engine.Buy, engine.Yes, 70, 5)
	sc.checkOrder(sell, engine.StatusFilled, 5)
	sc.checkPosition(sc.alice, engine.Yes, 5, 0)
	sc.checkPosition(carol, engine.Yes, 5, 0)
	sc.checkCash(carol, 1_000-350, 0)
	sc.checkCash(sc.alice, sc.startingCash-600+350, 0)
	sc.checkBook(nil, nil)
}

// An account's risk limits refuse what would pass them, position and locked cash alike, and let
// through what stays within.
func TestScenarioRiskLimits(t *testing.T) {
	sc := newScenario(t)
	sc.mem.setRiskLimits(sc.alice, 5, 200)
	for _, tc := range []struct {
		name  string
		price int
		qty   int64
		ok    bool
	}{
		{"over the position limit", 10, 6, false},
		{"over the locked-cash limit", 50, 5, false},
		{"within both", 40, 5, true},
		{"the position limit counts what rests", 10, 1, false},
	} {
		_, err := sc.place(sc.alice, engine.Buy, engine.Yes, tc.price, tc.qty)
		if tc.ok && err != nil {
			t.Errorf("%s: %v, want it placed", tc.name, err)
		}
		var de *domain.Error
		if !tc.ok && !(errors.As(err, &de) && de.Code == domain.RiskLimitCode) {
			t.Errorf("%s: %v, want %s", tc.name, err, domain.RiskLimitCode)
		}
	}
	sc.checkCash(sc.alice, sc.startingCash-200, 200)
	sc.checkBook([][2]int64{{40, 5}}, nil)
}

// A shard started afresh on the same store rebuilds the book from the resting orders it reads
// (load.go), with their fills, and trades on it as the first shard would have.
func TestScenarioReloadRebuildsTheBook(t *testing.T) {
	sc := newScenario(t)
	yes := sc.mustPlace(sc.alice, engine.Buy, engine.Yes, 55, 8)
	sc.mustPlace(sc.bob, engine.Buy, engine.No, 45, 3)
	sc.mustPlace(sc.alice, engine.Buy, engine.Yes, 50, 2)
	sc.shard.Stop()

	sc.shard = sc.start()
	sc.checkBook([][2]int64{{55, 5}, {50, 2}}, nil)
	sc.mustPlace(sc.bob, engine.Buy, engine.No, 45, 5)
	sc.checkOrder(yes, engine.StatusFilled, 8)
	sc.checkPosition(sc.alice, engine.Yes, 8, 0)
	sc.checkPosition(sc.bob, engine.No, 8, 0)
	sc.checkCash(sc.bob, sc.startingCash-8*45, 0)
	sc.checkCash(sc.alice, sc.startingCash-8*55-2*50, 100)
	sc.checkBook([][2]int64{{50, 2}}, nil)
}
