package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// riskOrder is an order of a risk test: who places it, and what.
type riskOrder struct {
	bob     bool // bob's rather than alice's
	side    engine.Side
	outcome engine.Outcome
	price   int
	qty     int64
	tif     engine.TimeInForce
}

func (f *fixture) order(o riskOrder, market uuid.UUID) exchange.PlaceRequest {
	account := f.alice
	if o.bob {
		account = f.bob
	}
	return exchange.PlaceRequest{Account: account, Market: market, Side: o.side, Outcome: o.outcome, Price: o.price, Quantity: o.qty,
		TimeInForce: o.tif}
}

// setLimits sets an account's risk limits in Postgres, as PUT /account/risk-limits does; a
// negative limit is none.
func (f *fixture) setLimits(t *testing.T, account, maxPosition, maxLockedCash int64) {
	t.Helper()
	var p, c *int64
	if maxPosition >= 0 {
		p = &maxPosition
	}
	if maxLockedCash >= 0 {
		c = &maxLockedCash
	}
	if _, err := f.st.SetRiskLimits(context.Background(), account, p, c); err != nil {
		t.Fatal(err)
	}
}

// riskField is the limit a refusal names, "" for none.
func riskField(err error) string {
	var e *domain.Error
	if errors.As(err, &e) && e.Code == domain.RiskLimitCode {
		return e.Field
	}
	return ""
}

var (
	buyYes = func(price int, qty int64) riskOrder {
		return riskOrder{side: engine.Buy, outcome: engine.Yes, price: price, qty: qty}
	}
	buyNo = func(price int, qty int64) riskOrder {
		return riskOrder{side: engine.Buy, outcome: engine.No, price: price, qty: qty}
	}
	sellYes = func(price int, qty int64) riskOrder {
		return riskOrder{side: engine.Sell, outcome: engine.Yes, price: price, qty: qty}
	}
	sellNo = func(price int, qty int64) riskOrder {
		return riskOrder{side: engine.Sell, outcome: engine.No, price: price, qty: qty}
	}
	byBob = func(o riskOrder) riskOrder { o.bob = true; return o }
)

// TestRiskRule is the rule of position-if-filled and locked cash, case by case: before is placed
// first (alice's, unless bob's), then alice's limits are set, then try is placed by alice.
func TestRiskRule(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		before                     []riskOrder
		maxPosition, maxLockedCash int64
		try                        riskOrder
		want                       string // the limit that refuses it, "" for none
	}{
		{"BUY YES within", nil, 10, -1, buyYes(40, 10), ""},
		{"BUY YES over", nil, 10, -1, buyYes(40, 11), "maxPosition"},
		{"BUY NO over", nil, 10, -1, buyNo(40, 11), "maxPosition"},
		{"open BUY YES counts", []riskOrder{buyYes(30, 6)}, 10, -1, buyYes(40, 5), "maxPosition"},
		{"open BUY NO counts toward NO only", []riskOrder{buyNo(30, 10)}, 10, -1, buyYes(40, 10), ""},
		{"open BUY NO counts toward NO", []riskOrder{buyNo(30, 6)}, 10, -1, buyNo(20, 5), "maxPosition"},
		{"held YES counts", []riskOrder{buyYes(60, 6), byBob(buyNo(40, 6))}, 10, -1, buyYes(30, 5), "maxPosition"},
		{"held NO counts", []riskOrder{buyNo(60, 6), byBob(buyYes(40, 6))}, 10, -1, buyNo(30, 5), "maxPosition"},
		{"held YES does not count toward NO", []riskOrder{buyYes(60, 10), byBob(buyNo(40, 10))}, 10, -1, buyNo(30, 10), ""},
		{"an open SELL does not lower it", []riskOrder{buyYes(60, 6), byBob(buyNo(40, 6)), sellYes(90, 6)}, 10, -1, buyYes(30, 5), "maxPosition"},
		{"SELL YES over the limit passes", []riskOrder{buyYes(60, 6), byBob(buyNo(40, 6))}, 2, 0, sellYes(90, 6), ""},
		{"SELL NO over the limit passes", []riskOrder{buyNo(60, 6), byBob(buyYes(40, 6))}, 2, 0, sellNo(90, 6), ""},
		{"an IOC counts whole", nil, 10, -1, riskOrder{side: engine.Buy, outcome: engine.Yes, price: 1, qty: 11, tif: engine.IOC}, "maxPosition"},
		{"lowered below use: a BUY is refused", []riskOrder{buyYes(30, 8)}, 5, -1, buyYes(30, 1), "maxPosition"},
		{"lowered below use: the other outcome is not", []riskOrder{buyYes(30, 8)}, 5, -1, buyNo(30, 5), ""},
		{"cash within", []riskOrder{buyYes(50, 10)}, -1, 1000, buyNo(50, 10), ""},
		{"cash over", []riskOrder{buyYes(50, 10)}, -1, 1000, buyNo(50, 11), "maxLockedCash"},
		{"cash of a filled order is not locked", []riskOrder{buyYes(60, 10), byBob(buyNo(40, 10))}, -1, 100, buyNo(10, 10), ""},
		{"cash lowered below use", []riskOrder{buyYes(50, 10)}, -1, 100, buyNo(1, 1), "maxLockedCash"},
		{"cash limit and SELL", []riskOrder{buyYes(60, 6), byBob(buyNo(40, 6)), buyYes(50, 10)}, -1, 0, sellYes(90, 6), ""},
		{"position checked first", nil, 1, 1, buyYes(50, 2), "maxPosition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.shard(t, "")
			ctx := context.Background()
			for _, o := range tc.before {
				if _, err := s.Place(ctx, f.order(o, f.market)); err != nil {
					t.Fatalf("placing %+v: %v", o, err)
				}
			}
			f.setLimits(t, f.alice, tc.maxPosition, tc.maxLockedCash)
			_, err := s.Place(ctx, f.order(tc.try, f.market))
			if got := riskField(err); got != tc.want || (tc.want == "" && err != nil) {
				t.Fatalf("placed %+v: %v (limit %q), want the limit %q", tc.try, err, got, tc.want)
			}
			f.checkBuysLocked(t, f.alice, f.bob)
			if err := s.CheckBooks(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRiskAmend: an amend is checked by what it adds — remaining quantity to the position,
// cash to the lock — and one that adds nothing passes under any limit.
func TestRiskAmend(t *testing.T) {
	f := newFixture(t)
	s := f.shard(t, "")
	ctx := context.Background()
	o, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 40, 6))
	if err != nil {
		t.Fatal(err)
	}
	amend := func(price int, remaining int64) error {
		_, err := s.Amend(ctx, exchange.AmendRequest{Account: f.alice, Market: f.market, Seq: o.Order.Seq, Side: engine.Buy,
			Outcome: engine.Yes, Price: price, Remaining: remaining})
		return err
	}
	f.setLimits(t, f.alice, 8, 400)
	for _, step := range []struct {
		price     int
		remaining int64
		want      string
	}{
		{0, 8, ""},               // position 8, 320 locked
		{0, 9, "maxPosition"},    // 9 > 8
		{55, 0, "maxLockedCash"}, // 440 > 400
		{0, 5, ""},               // down: 200 locked
		{80, 0, ""},              // 400 locked, exactly the limit
		{81, 0, "maxLockedCash"}, // 405
	} {
		err := amend(step.price, step.remaining)
		if got := riskField(err); got != step.want || (step.want == "" && err != nil) {
			t.Fatalf("amend to price %d, remaining %d: %v, want the limit %q", step.price, step.remaining, err, step.want)
		}
		f.checkBuysLocked(t, f.alice)
	}
	f.setLimits(t, f.alice, 1, 1) // far below use: only what adds is refused
	if err := amend(0, 6); riskField(err) != "maxPosition" {
		t.Fatalf("amend up under a lowered limit: %v", err)
	}
	if err := amend(50, 3); err != nil {
		t.Fatalf("amend down in quantity and price under a lowered limit: %v", err)
	}
	if _, err := s.Cancel(ctx, exchange.CancelRequest{Account: f.alice, Market: f.market, Seq: o.Order.Seq}); err != nil {
		t.Fatalf("cancel under a lowered limit: %v", err)
	}
	f.checkBuysLocked(t, f.alice)
}

// TestRiskLimitChangeTakesEffect changes the limits behind the shard's back, once it has a view of
// them: the next order is decided by the new limits, whether they refuse what the view allowed or
// allow what the view refused.
func TestRiskLimitChangeTakesEffect(t *testing.T) {
	f := newFixture(t)
	s := f.shard(t, "")
	ctx := context.Background()
	f.setLimits(t, f.alice, 10, -1)
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 10, 5)); err != nil { // learns alice's limits
		t.Fatal(err)
	}
	f.setLimits(t, f.alice, 6, -1) // the view still says 10
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 10, 2)); riskField(err) != "maxPosition" {
		t.Fatalf("a placement over the new limit: %v, want it refused", err)
	}
	if n := rerun(t, s); n != 1 {
		t.Errorf("%v batches ran again, want 1: the commit's check of the limits' version", n)
	}
	f.setLimits(t, f.alice, 100, -1) // the view now says 6
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 10, 20)); err != nil {
		t.Fatalf("a placement within the raised limit: %v", err)
	}
	// A refusal the views foresee reads at once: it runs one batch, not two.
	before := rerun(t, s)
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 10, 1000)); riskField(err) != "maxPosition" {
		t.Fatalf("a placement far over the limit: %v", err)
	}
	if n := rerun(t, s) - before; n != 0 {
		t.Errorf("a refusal the views foresaw ran %v batches again", n)
	}
	f.checkBuysLocked(t, f.alice)
}

// TestLockedCashAcrossShards: two shards lock the same account's cash in markets of their own,
// each from its view. The database refuses the commit that would take locked cash past the
// limit; the shard runs it again from reads and refuses the order alone.
func TestLockedCashAcrossShards(t *testing.T) {
	f := newFixture(t)
	other := storetest.Market(t, f.st)
	a, b := f.shard(t, ""), f.shard(t, "")
	ctx := context.Background()
	f.setLimits(t, f.alice, -1, 1000)
	for _, s := range []*Shard{a, b} { // each learns alice's cash and limits
		m := f.market
		if s == b {
			m = other
		}
		if _, err := s.Place(ctx, exchange.PlaceRequest{Account: f.alice, Market: m, Side: engine.Buy, Outcome: engine.Yes, Price: 10, Quantity: 10}); err != nil {
			t.Fatal(err)
		}
	}
	// a's view: 100 locked (its own order), though b's order has locked 100 more; with 800 more,
	// exactly the limit.
	if _, err := a.Place(ctx, f.buy(f.alice, engine.Yes, 50, 16)); err != nil {
		t.Fatalf("placing to exactly the limit: %v", err)
	}
	if _, locked := f.cash(t, f.alice); locked != 1000 {
		t.Fatalf("locked %d, want 1000", locked)
	}
	before := rerun(t, b)
	_, err := b.Place(ctx, exchange.PlaceRequest{Account: f.alice, Market: other, Side: engine.Buy, Outcome: engine.Yes, Price: 1, Quantity: 1})
	if riskField(err) != "maxLockedCash" {
		t.Fatalf("b's placement past the limit a used: %v, want maxLockedCash", err)
	}
	if rerun(t, b) == before {
		t.Error("b refused from its view: it saw 200 locked, so only the database's guard could refuse it")
	}
	if _, locked := f.cash(t, f.alice); locked != 1000 {
		t.Fatalf("locked %d, want 1000", locked)
	}
	f.checkBuysLocked(t, f.alice)
}

// exposures reads every account's position-if-filled per market and outcome, and its locked cash,
// from Postgres.
func exposures(t *testing.T, st *store.Store) (map[string]int64, map[int64]int64) {
	t.Helper()
	ctx := context.Background()
	rows, err := st.Pool.Query(ctx, `select account_id, market_id, outcome, sum(q)::bigint from (
		select account_id, market_id, outcome, quantity as q from positions
		union all
		select account_id, market_id, outcome, quantity - filled_quantity from orders
		 where side = 'BUY' and status in ('OPEN', 'PARTIALLY_FILLED')) x group by 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int64{}
	for rows.Next() {
		var account, q int64
		var market uuid.UUID
		var outcome string
		if err := rows.Scan(&account, &market, &outcome, &q); err != nil {
			t.Fatal(err)
		}
		pos[fmt.Sprintf("%d/%s/%s", account, market, outcome)] = q
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	locked := map[int64]int64{}
	rows, err = st.Pool.Query(ctx, `select id, locked from account_balances`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, l int64
		if err := rows.Scan(&id, &l); err != nil {
			t.Fatal(err)
		}
		locked[id] = l
	}
	return pos, locked
}

// TestPropertyRiskLimits places, amends and cancels random orders of three accounts in two
// markets on two shards while their limits change at random, and checks after every step that a
// use over its limit never grew (the one way a use exceeds a limit is a limit lowered below it,
// and then only what reduces it passes), and that every refusal by a limit was due: what the
// order would have added took a use past the limit.
func TestPropertyRiskLimits(t *testing.T) {
	f := newFixture(t)
	carol := storetest.Account(t, f.st, "carol", 100_000)
	accounts := []int64{f.alice, f.bob, carol}
	markets := []uuid.UUID{f.market, storetest.Market(t, f.st)}
	shards := []*Shard{f.shard(t, ""), f.shard(t, "")} // a market each
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(37, 24))
	limits := map[int64][2]int64{}
	for _, a := range accounts {
		limits[a] = [2]int64{-1, -1}
	}
	type resting struct {
		account int64
		market  int
		seq     int64
		side    engine.Side
		outcome engine.Outcome
	}
	var open []resting
	pos, locked := exposures(t, f.st)
	refusals := 0
	for step := range 600 {
		a := accounts[rng.IntN(len(accounts))]
		mi := rng.IntN(len(markets))
		s, m := shards[mi], markets[mi]
		outcome := engine.Outcome(rng.IntN(2) + int(engine.Yes))
		key := fmt.Sprintf("%d/%s/%s", a, m, outcome)
		var err error
		var what string
		var addShares, addCash int64
		switch r := rng.IntN(10); {
		case r == 0:
			l := [2]int64{int64(rng.IntN(40)) - 5, int64(rng.IntN(3000)) - 300}
			limits[a] = l
			f.setLimits(t, a, l[0], l[1])
			what = fmt.Sprintf("limits of %d: %v", a, l)
		case r <= 5:
			side := engine.Buy
			if r == 5 {
				side = engine.Sell
			}
			p := exchange.PlaceRequest{Account: a, Market: m, Side: side, Outcome: outcome, Price: 1 + rng.IntN(99), Quantity: 1 + int64(rng.IntN(8))}
			if rng.IntN(4) == 0 {
				p.TimeInForce = engine.IOC
			}
			if side == engine.Buy {
				addShares, addCash = p.Quantity, int64(p.Price)*p.Quantity
			}
			placed, perr := s.Place(ctx, p)
			if err = perr; err == nil && placed.Order.Status.Resting() {
				open = append(open, resting{a, mi, placed.Order.Seq, side, outcome})
			}
			what = fmt.Sprintf("place %+v", p)
		case r <= 7 && len(open) > 0:
			i := rng.IntN(len(open))
			o := open[i]
			a, s, m, outcome = o.account, shards[o.market], markets[o.market], o.outcome
			key = fmt.Sprintf("%d/%s/%s", a, m, outcome)
			req := exchange.AmendRequest{Account: a, Market: m, Seq: o.seq, Side: o.side, Outcome: o.outcome,
				Price: 1 + rng.IntN(99), Remaining: 1 + int64(rng.IntN(8))}
			if price, remaining, ok := orderNow(t, f.st, m, o.seq); o.side == engine.Buy && ok {
				addShares = req.Remaining - remaining
				addCash = int64(req.Price)*req.Remaining - int64(price)*remaining
			}
			_, err = s.Amend(ctx, req)
			what = fmt.Sprintf("amend %+v", req)
		case len(open) > 0:
			i := rng.IntN(len(open))
			o := open[i]
			open = append(open[:i], open[i+1:]...)
			_, err = shards[o.market].Cancel(ctx, exchange.CancelRequest{Account: o.account, Market: markets[o.market], Seq: o.seq})
			what = fmt.Sprintf("cancel %+v", o)
		default:
			continue
		}
		if err != nil && riskField(err) == "" && !errors.Is(err, domain.ErrInsufficientFunds) && !errors.Is(err, domain.ErrInsufficientShares) &&
			!errors.Is(err, domain.ErrOrderNotOpen) && !errors.Is(err, domain.ErrPostOnlyWouldCross) {
			t.Fatalf("step %d, %s: %v", step, what, err)
		}
		if field := riskField(err); field != "" {
			refusals++
			l := limits[a]
			due := field == "maxPosition" && addShares > 0 && pos[key]+addShares > l[0] && l[0] >= 0 ||
				field == "maxLockedCash" && addCash > 0 && locked[a]+addCash > l[1] && l[1] >= 0
			if !due {
				t.Fatalf("step %d, %s: refused on %s, which it does not pass (position %d, locked %d, limits %v)",
					step, what, field, pos[key], locked[a], l)
			}
		}
		after, afterLocked := exposures(t, f.st)
		for k, v := range after {
			var acc int64
			fmt.Sscanf(k, "%d/", &acc)
			if l := limits[acc][0]; l >= 0 && v > l && v > pos[k] {
				t.Fatalf("step %d, %s: position %s grew from %d to %d, over its limit %d", step, what, k, pos[k], v, l)
			}
		}
		for acc, v := range afterLocked {
			if l := limits[acc][1]; l >= 0 && v > l && v > locked[acc] {
				t.Fatalf("step %d, %s: account %d's locked cash grew from %d to %d, over its limit %d", step, what, acc, locked[acc], v, l)
			}
		}
		pos, locked = after, afterLocked
	}
	if refusals < 20 {
		t.Errorf("only %d refusals by a limit in the run: the limits were not tested", refusals)
	}
	f.checkBuysLocked(t, accounts...)
}

// orderNow reads an order's price and remaining quantity, and whether it is resting.
func orderNow(t *testing.T, st *store.Store, market uuid.UUID, seq int64) (price int, remaining int64, resting bool) {
	t.Helper()
	err := st.Pool.QueryRow(context.Background(), `select price, quantity - filled_quantity, status in ('OPEN', 'PARTIALLY_FILLED')
		from orders where market_id = $1 and seq = $2`, market, seq).Scan(&price, &remaining, &resting)
	if err != nil {
		t.Fatal(err)
	}
	return price, remaining, resting
}

// checkBuysLocked checks that each account's locked cash is what its open BUY orders need
// (checkLocked: a SELL locks no cash).
func (f *fixture) checkBuysLocked(t *testing.T, accounts ...int64) {
	t.Helper()
	f.checkLocked(t, accounts...)
}
