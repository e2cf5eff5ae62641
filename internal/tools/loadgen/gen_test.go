package loadgen

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"testing"
)

// simulate runs one bot's generator of the basic mix for n steps against a state in which every
// placement is answered as filled completely (so the bot comes to hold shares and SELLs), and calls
// visit with each step, the mid of its market when it was made and the shares the bot could sell
// before.
func simulate(t *testing.T, seed uint64, markets, n int, visit func(s step, mid, availBefore int)) *botState {
	t.Helper()
	index, m := testMarkets(markets)
	g := newGenerator(seed, 1, m, MixBasic)
	s := newBotState(index)
	for range n {
		before := append([]int(nil), s.avail...)
		st := g.next(s)
		o := st.order
		visit(st, m.get(st.market), before[2*o.market+int(o.outcome)])
		switch st.kind {
		case stepPlace:
			s.placed(o, &orderResp{ID: "x", Status: "FILLED", Quantity: int64(o.qty), FilledQuantity: int64(o.qty)})
			if st.order.cross { // a resting order too, to have cancel candidates
				s.remember(openOrder{id: "y", market: o.market})
			}
		case stepCancel:
			s.takeOpen(st.cancel)
		case stepCancelAll:
			s.cancelledAll(nil)
		}
	}
	return s
}

// testMarkets returns the index of markets named a, b, c, ... and their mids, all at 50.
func testMarkets(markets int) (map[string]int, *mids) {
	index := map[string]int{}
	initial := make([]int, markets)
	for i := range markets {
		index[string(rune('a'+i))] = i
		initial[i] = 50
	}
	return index, newMids(initial)
}

func TestGeneratorMix(t *testing.T) {
	const n = 300_000
	var kinds [numStepKinds]int
	var places, crosses, sells int
	orderKinds := map[[2]string]int{}
	simulate(t, 42, 3, n, func(s step, mid, avail int) {
		kinds[s.kind]++
		if s.kind != stepPlace {
			return
		}
		o := s.order
		places++
		if o.price < 1 || o.price > 99 {
			t.Fatalf("price %d out of 1..99: %+v", o.price, o)
		}
		if o.qty < 1 || o.qty > maxQty {
			t.Fatalf("quantity %d out of 1..%d: %+v", o.qty, maxQty, o)
		}
		if o.sell {
			sells++
			if o.qty > avail {
				t.Fatalf("SELL of %d with only %d held: %+v", o.qty, avail, o)
			}
		}
		side := "BUY"
		if o.sell {
			side = "SELL"
		}
		orderKinds[[2]string{side, outcomeName(o.outcome)}]++
		// A crossing order is priced through the mid, a resting one on its own side of it.
		y := o.yesPrice()
		through := (o.bid() && y > mid) || (!o.bid() && y < mid)
		if through != o.cross {
			t.Fatalf("order %+v (YES price %d) against mid %d: cross=%v", o, y, mid, o.cross)
		}
		if o.cross {
			crosses++
		}
	})

	if share := float64(crosses) / float64(places); math.Abs(share-1.0/3) > 0.01 {
		t.Errorf("crossing share %.3f, want about 1/3", share)
	}
	for _, k := range [][2]string{{"BUY", "YES"}, {"BUY", "NO"}, {"SELL", "YES"}, {"SELL", "NO"}} {
		if got := orderKinds[k]; got < places/20 {
			t.Errorf("%s %s: %d of %d placements", k[0], k[1], got, places)
		}
	}
	share := func(k stepKind) float64 { return float64(kinds[k]) / n }
	// Placements take the cancels' turns while the bot has no open order, hence the ranges.
	if p := share(stepPlace); p < 0.68 || p > 0.80 {
		t.Errorf("placements %.3f of steps, want ~0.70", p)
	}
	if c := share(stepCancel); c < 0.10 || c > 0.21 {
		t.Errorf("cancels %.3f of steps, want up to ~0.20", c)
	}
	for _, k := range []stepKind{stepBook, stepTrades, stepPositions} {
		if r := share(k); math.Abs(r-0.10/3) > 0.005 {
			t.Errorf("%s %.4f of steps, want ~%.4f", k, r, 0.10/3)
		}
	}
	if a := share(stepCancelAll); math.Abs(a-1.0/cancelAllEvery) > 0.001 {
		t.Errorf("cancel-all %.4f of steps, want ~%.4f", a, 1.0/cancelAllEvery)
	}
	t.Logf("steps %v; placements %d, crossing %d, sells %d, kinds %v", kinds, places, crosses, sells, orderKinds)
}

func TestGeneratorWithoutSharesOnlyBuys(t *testing.T) {
	m := newMids([]int{50})
	g := newGenerator(7, 1, m, MixBasic)
	s := newBotState(map[string]int{"a": 0})
	for range 10_000 {
		if st := g.next(s); st.kind == stepPlace && st.order.sell {
			t.Fatalf("SELL without shares: %+v", st.order)
		}
	}
}

func TestGeneratorIsDeterministic(t *testing.T) {
	run := func() []step {
		var steps []step
		simulate(t, 99, 2, 2000, func(s step, _, _ int) { steps = append(steps, s) })
		return steps
	}
	a, b := run(), run()
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("the runs took %d and %d steps", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
}

func TestMidDriftsSlowlyWithinBounds(t *testing.T) {
	m := newMids([]int{50, 2, 99})
	if m.get(1) != midMin || m.get(2) != midMax {
		t.Fatalf("initial mids not clamped: %d %d", m.get(1), m.get(2))
	}
	g := newGenerator(3, 1, m, MixBasic)
	prev, moves, lo, hi := m.get(0), 0, 100, 0
	const n = 100_000
	for range n {
		p := m.step(0, g.rng)
		if d := p - prev; d < -1 || d > 1 {
			t.Fatalf("mid jumped from %d to %d", prev, p)
		}
		if p != prev {
			moves++
		}
		if p < midMin || p > midMax {
			t.Fatalf("mid %d outside %d..%d", p, midMin, midMax)
		}
		lo, hi, prev = min(lo, p), max(hi, p), p
	}
	if rate := float64(moves) / n; rate > 2.0/driftEvery {
		t.Errorf("mid moved on %.3f of steps, want about 1/%d", rate, driftEvery)
	}
	if hi-lo < 10 {
		t.Errorf("mid stayed within %d..%d over %d steps: no drift", lo, hi, n)
	}
}

// simulateMarketMaker runs one bot's generator of the market-maker mix for n steps against a
// state in which a crossing placement fills completely and any other rests untouched, an amend is
// taken as asked, and a cancel cancels. It calls visit with each step, the mid of its market when
// it was made, and the bot's state before it (a copy).
func simulateMarketMaker(t *testing.T, seed uint64, markets, n int, visit func(s step, mid int, before *botState)) *botState {
	t.Helper()
	index, m := testMarkets(markets)
	names := make([]string, markets)
	for name, i := range index {
		names[i] = name
	}
	g := newGenerator(seed, 1, m, MixMarketMaker)
	s := newBotState(index)
	ids := 0
	place := func(o order) {
		q := int64(o.qty)
		if o.cross {
			s.placed(o, &orderResp{ID: "x", Status: "FILLED", Quantity: q, FilledQuantity: q})
			return
		}
		ids++
		s.placed(o, &orderResp{ID: strconv.Itoa(ids), Status: "OPEN", Quantity: q})
	}
	cancelled := func(os []openOrder) {
		rs := make([]orderResp, len(os))
		for i, o := range os {
			side := "BUY"
			if o.sell {
				side = "SELL"
			}
			rs[i] = orderResp{ID: o.id, MarketID: names[o.market], Side: side, Outcome: outcomeName(o.outcome),
				Status: "CANCELLED", Quantity: o.quantity, FilledQuantity: o.quantity - int64(o.remaining)}
		}
		s.cancelledMany(rs)
	}
	for range n {
		before := &botState{marketIndex: s.marketIndex, avail: append([]int(nil), s.avail...), open: append([]openOrder(nil), s.open...)}
		st := g.next(s)
		visit(st, m.get(st.market), before)
		switch st.kind {
		case stepPlace:
			place(st.order)
		case stepPlaceBatch:
			for _, o := range st.batch[:st.n] {
				place(o)
			}
		case stepAmend:
			oo := s.takeOpen(st.amend.open)
			remaining := int64(oo.remaining)
			if st.amend.qty != 0 {
				remaining = int64(st.amend.qty)
			}
			filled := oo.quantity - int64(oo.remaining)
			s.amended(oo, st.amend.price, &orderResp{ID: oo.id, Status: "OPEN", Quantity: filled + remaining, FilledQuantity: filled})
		case stepCancelBatch:
			cancelled(s.takeOldest(st.cancel, nil))
		case stepCancelMarket:
			var os []openOrder
			for _, o := range s.open {
				if o.market == st.market {
					os = append(os, o)
				}
			}
			s.forgetMarket(st.market)
			cancelled(os)
		}
	}
	return s
}

func TestMarketMakerMix(t *testing.T) {
	const n = 300_000
	var kinds [numStepKinds]int
	var placements, batchOrders, crosses, sells, shrinks, moves int
	batchSizes := map[int]int{}
	simulateMarketMaker(t, 42, 3, n, func(s step, mid int, before *botState) {
		kinds[s.kind]++
		if len(before.open) > mmMaxOpen {
			t.Fatalf("%d open orders, more than %d", len(before.open), mmMaxOpen)
		}
		var os []order
		switch s.kind {
		case stepPlace:
			os = []order{s.order}
		case stepPlaceBatch:
			if s.n < mmMinBatch || s.n > mmMaxBatch {
				t.Fatalf("a batch of %d placements", s.n)
			}
			if len(before.open)+s.n > mmMaxOpen {
				t.Fatalf("a batch of %d with %d orders open: past %d", s.n, len(before.open), mmMaxOpen)
			}
			batchSizes[s.n]++
			os = s.batch[:s.n]
			batchOrders += s.n
		case stepCancelBatch:
			if s.cancel < 1 || s.cancel > mmMaxCancel || s.cancel > len(before.open) {
				t.Fatalf("a cancel of %d of %d open orders", s.cancel, len(before.open))
			}
		case stepAmend:
			a := s.amend
			oo := before.open[a.open]
			if oo.market != s.market {
				t.Fatalf("amend of an order in market %d named market %d", oo.market, s.market)
			}
			if a.price == 0 { // the same price, less: keeps its place in the queue
				shrinks++
				if a.qty < 1 || a.qty >= oo.remaining {
					t.Fatalf("shrink of %+v to %d", oo, a.qty)
				}
				return
			}
			moves++
			if a.price < 1 || a.price > 99 || (oo.sell && a.qty != 0) || a.qty < 0 || a.qty > maxQty {
				t.Fatalf("amend %+v of %+v", a, oo)
			}
			yes := a.price
			if oo.outcome == outNo {
				yes = 100 - a.price
			}
			if (oo.bid() && yes >= mid && yes > 1) || (!oo.bid() && yes <= mid && yes < 99) {
				t.Fatalf("amend of %+v to YES price %d against mid %d: not resting on its side", oo, yes, mid)
			}
		}
		var selling [2]int
		for _, o := range os {
			placements++
			if o.market != s.market {
				t.Fatalf("a placement in market %d of a step in %d", o.market, s.market)
			}
			if o.price < 1 || o.price > 99 || o.qty < 1 || o.qty > maxQty {
				t.Fatalf("placement %+v out of range", o)
			}
			y := o.yesPrice()
			if through := (o.bid() && y > mid) || (!o.bid() && y < mid); through != o.cross {
				t.Fatalf("order %+v (YES price %d) against mid %d: cross=%v", o, y, mid, o.cross)
			}
			if o.cross {
				crosses++
			}
			if o.sell {
				sells++
				selling[o.outcome] += o.qty
				if held := before.available(o.market, o.outcome); selling[o.outcome] > held {
					t.Fatalf("the step's SELLs of %s sell %d with only %d held: %+v", outcomeName(o.outcome), selling[o.outcome], held, s)
				}
			}
		}
	})

	share := func(k stepKind) float64 { return float64(kinds[k]) / n }
	t.Logf("steps %v; placements %d (%d in batches, sizes %v), crossing %d, sells %d; amends: %d shrink, %d move",
		kinds, placements, batchOrders, batchSizes, crosses, sells, shrinks, moves)
	for _, k := range []stepKind{stepCancel, stepCancelAll} {
		if kinds[k] != 0 {
			t.Errorf("%d steps of the basic mix's %s", kinds[k], k)
		}
	}
	// The proportions shift where the bot is at mmMaxOpen: placements become cancels.
	for _, c := range []struct {
		k        stepKind
		lo, hi   float64
		proposed float64
	}{
		{stepAmend, 0.33, 0.35, mmAmendPct / 100.0},
		{stepPlaceBatch, 0.17, 0.27, mmBatchPct / 100.0},
		{stepCancelBatch, 0.15, 0.27, mmCancelPct / 100.0},
		{stepPlace, 0.10, 0.15, mmPlacePct / 100.0},
	} {
		if r := share(c.k); r < c.lo || r > c.hi {
			t.Errorf("%s %.3f of steps, want %.2f..%.2f (%.2f proposed)", c.k, r, c.lo, c.hi, c.proposed)
		}
	}
	for _, k := range []stepKind{stepBook, stepTrades, stepPositions} {
		if r := share(k); math.Abs(r-0.10/3) > 0.005 {
			t.Errorf("%s %.4f of steps, want ~%.4f", k, r, 0.10/3)
		}
	}
	if a := share(stepCancelMarket); math.Abs(a-1.0/mmCancelMarketEvery) > 0.001 {
		t.Errorf("cancel-market %.4f of steps, want ~%.4f", a, 1.0/mmCancelMarketEvery)
	}
	if c := float64(crosses) / float64(placements); math.Abs(c-1.0/3) > 0.01 {
		t.Errorf("crossing share %.3f, want about 1/3", c)
	}
	if sells < placements/20 {
		t.Errorf("%d SELLs of %d placements", sells, placements)
	}
	if shrinks < moves/4 || shrinks > moves {
		t.Errorf("%d shrinking amends for %d moves, want about 1 in %d", shrinks, moves, mmShrinkEvery)
	}
	for size := mmMinBatch; size <= mmMaxBatch; size++ {
		if batchSizes[size] < kinds[stepPlaceBatch]/(mmMaxBatch-mmMinBatch+1)/2 {
			t.Errorf("batches of %d: %d of %d", size, batchSizes[size], kinds[stepPlaceBatch])
		}
	}
	// Open loop turns placements/s into steps/s with the proposed mean; the bot's state moves it
	// some, not much.
	per100 := float64(placements) / n * 100
	if want := mixSpecs[MixMarketMaker].placementsPer100; math.Abs(per100-want)/want > 0.15 {
		t.Errorf("%.1f placements per hundred steps, the schedule assumes %.1f", per100, want)
	}
}

func TestMarketMakerMixIsDeterministic(t *testing.T) {
	run := func() []step {
		var steps []step
		simulateMarketMaker(t, 99, 2, 3000, func(s step, _ int, _ *botState) { steps = append(steps, s) })
		return steps
	}
	a, b := run(), run()
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("the runs took %d and %d steps", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
}

// TestBasicMixIsUnchanged pins the basic mix's decisions for a seed to those of the generator
// before the other mixes existed (commit 98fd9a3, where the same hash was computed), so that a
// seed replays the runs measured then and the figures stay comparable.
func TestBasicMixIsUnchanged(t *testing.T) {
	h := fnv.New64a()
	simulate(t, 1, 8, 20000, func(s step, mid, avail int) {
		fmt.Fprintf(h, "%d %+v %d %d %d %d;", s.kind, s.order, s.cancel, s.market, mid, avail)
	})
	if got, want := h.Sum64(), uint64(0xaf47c7a163b9f95a); got != want {
		t.Errorf("the basic mix's steps hash to %#x, want %#x: its decisions changed", got, want)
	}
}
