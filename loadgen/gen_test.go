package loadgen

import (
	"math"
	"testing"
)

// simulate runs one bot's generator for n steps against a state in which every placement is
// answered as filled completely (so the bot comes to hold shares and SELLs), and calls visit
// with each step, the mid of its market when it was made and the shares the bot could sell before.
func simulate(t *testing.T, seed uint64, markets, n int, visit func(s step, mid, availBefore int)) *botState {
	t.Helper()
	index := map[string]int{}
	initial := make([]int, markets)
	for i := range markets {
		index[string(rune('a'+i))] = i
		initial[i] = 50
	}
	m := newMids(initial)
	g := newGenerator(seed, 1, m)
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
	g := newGenerator(7, 1, m)
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
	g := newGenerator(3, 1, m)
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
