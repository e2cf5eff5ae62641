package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// ledger is a digest of every account's cash (account_balances: the totals, which an acquire a
// refused request made does not change), every holding and every order: what a refused
// request must leave as it was.
func (f *fixture) ledger(t *testing.T) string {
	t.Helper()
	var d string
	err := f.st.Pool.QueryRow(context.Background(), `select md5(coalesce(string_agg(x, ',' order by x), '')) from (
		select 'a' || id || ':' || available || ':' || locked as x from account_balances
		union all select 'p' || account_id || market_id || outcome || ':' || quantity || ':' || locked_quantity from positions
		union all select 'o' || id || status || ':' || filled_quantity || ':' || price || ':' || quantity from orders) s`).Scan(&d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPropertyHalts places, amends and cancels random orders of three accounts in two markets on
// two shards, each of which keeps what it read of the halts, while a market's pause and the
// exchange's halt change at random through the store (as the admin API and the operator change
// them). After every step: a placement or amend is refused with the halt's code exactly when the
// halts as last changed halt its market — the shards, which never hear of a change, learn it at
// their next commit — and a refused one leaves the ledger as it was; a cancel is never refused by
// a halt.
func TestPropertyHalts(t *testing.T) {
	f := newFixture(t)
	carol := storetest.Account(t, f.st, "carol", 100_000)
	accounts := []int64{f.alice, f.bob, carol}
	markets := []uuid.UUID{f.market, storetest.Market(t, f.st)}
	shards := []*Shard{f.shard(t, ""), f.shard(t, "")} // a market each
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(55, 2))
	paused := []bool{false, false}
	exchangeHalted := false
	halt := func(mi int) domain.Halt { return domain.Of(exchangeHalted, false, paused[mi]) }
	type resting struct {
		account int64
		market  int
		seq     int64
		side    engine.Side
		outcome engine.Outcome
	}
	var open []resting
	refused, cancelsWhileHalted := 0, 0
	for step := range 500 {
		a := accounts[rng.IntN(len(accounts))]
		mi := rng.IntN(len(markets))
		var err error
		var what string
		trades := false // a placement or an amend, which a halt refuses
		before := f.ledger(t)
		switch r := rng.IntN(12); {
		case r == 0:
			paused[mi] = !paused[mi]
			if _, err := f.st.SetMarketPaused(ctx, markets[mi], paused[mi], time.Now()); err != nil {
				t.Fatal(err)
			}
			continue
		case r == 1:
			exchangeHalted = !exchangeHalted
			if _, err := f.st.SetExchangeHalted(ctx, exchangeHalted, time.Now()); err != nil {
				t.Fatal(err)
			}
			continue
		case r <= 6:
			side := engine.Buy
			if r == 6 {
				side = engine.Sell
			}
			p := exchange.PlaceRequest{Account: a, Market: markets[mi], Side: side, Outcome: engine.Outcome(rng.IntN(2) + int(engine.Yes)),
				Price: 1 + rng.IntN(99), Quantity: 1 + int64(rng.IntN(8))}
			placed, perr := shards[mi].Place(ctx, p)
			if err = perr; err == nil && placed.Order.Status.Resting() {
				open = append(open, resting{a, mi, placed.Order.Seq, side, p.Outcome})
			}
			what, trades = fmt.Sprintf("place %+v", p), true
		case r <= 8 && len(open) > 0:
			o := open[rng.IntN(len(open))]
			mi = o.market
			req := exchange.AmendRequest{Account: o.account, Market: markets[mi], Seq: o.seq, Side: o.side, Outcome: o.outcome,
				Price: 1 + rng.IntN(99), Remaining: 1 + int64(rng.IntN(8))}
			_, err = shards[mi].Amend(ctx, req)
			what, trades = fmt.Sprintf("amend %+v", req), true
		case len(open) > 0:
			i := rng.IntN(len(open))
			o := open[i]
			open = append(open[:i], open[i+1:]...)
			mi = o.market
			if halt(mi) != domain.NotHalted {
				cancelsWhileHalted++
			}
			_, err = shards[mi].Cancel(ctx, exchange.CancelRequest{Account: o.account, Market: markets[mi], Seq: o.seq})
			what = fmt.Sprintf("cancel %+v", o)
		default:
			continue
		}
		want := halt(mi).Refusal()
		var got *domain.Error
		errors.As(err, &got)
		isHalt := got != nil && (got.Code == domain.ErrMarketHalted.Code || got.Code == domain.ErrExchangeHalted.Code || got.Code == domain.ErrEventHalted.Code)
		switch {
		case trades && want != nil:
			if !errors.Is(err, want) {
				t.Fatalf("step %d, %s in a market halted by %q: %v, want %s", step, what, halt(mi), err, want.Code)
			}
			if after := f.ledger(t); after != before {
				t.Fatalf("step %d, the refused %s changed the ledger", step, what)
			}
			refused++
		case isHalt:
			t.Fatalf("step %d, %s refused by a halt (%s) while its market is halted by %q", step, what, got.Code, halt(mi))
		case err != nil && !errors.Is(err, domain.ErrInsufficientFunds) && !errors.Is(err, domain.ErrInsufficientShares) &&
			!errors.Is(err, domain.ErrOrderNotOpen) && !errors.Is(err, domain.ErrPostOnlyWouldCross):
			t.Fatalf("step %d, %s: %v", step, what, err)
		}
	}
	if refused < 30 || cancelsWhileHalted < 5 {
		t.Errorf("%d refusals by a halt and %d cancels while halted in the run: the halts were not tested", refused, cancelsWhileHalted)
	}
	f.checkLocked(t, accounts...)
}
