package engine

import (
	"math/rand/v2"
	"testing"
)

// streamOp is one pre-generated operation of the realistic stream: a submission, or, when cancel
// is set, a cancel of the order submitted back submissions earlier, or, when amend is set, an amend
// of that order to price and remaining.
type streamOp struct {
	o         Order
	taker     bool // the submission was priced to cross
	cancel    bool
	amend     bool
	back      OrderID
	price     int
	remaining int64
}

// realisticStream generates about n operations as market makers and takers produce them: prices
// around a mid that drifts, about a third of the orders crossing the spread, all four order kinds,
// a thousand accounts. Every passive order is cancelled a little later unless it has filled by then
// (the cancel then finds nothing, as real cancels racing fills do), so the book stays at a steady
// size however many times the stream is replayed.
func realisticStream(n int, seed uint64) []streamOp {
	rng := rand.New(rand.NewPCG(seed, 1))
	subs := make([]Order, n)
	cancelsAt := make([][]int, n) // position → ordinals of the submissions to cancel there
	takers := make([]bool, n)
	mid := 50
	for i := range subs {
		if rng.IntN(64) == 0 {
			mid = min(max(mid+rng.IntN(3)-1, 20), 80)
		}
		bid := rng.IntN(2) == 0
		var p int // YES price
		crossing := rng.IntN(3) == 0
		switch {
		case crossing && bid: // priced through the best asks
			p = mid + 1 + rng.IntN(3)
		case crossing:
			p = mid - 1 - rng.IntN(3)
		case bid:
			p = mid - rng.IntN(6)
		default:
			p = mid + 1 + rng.IntN(6)
		}
		o := Order{Account: AccountID(1 + rng.IntN(1000)), Quantity: int64(1 + rng.IntN(10))}
		switch {
		case bid && rng.IntN(2) == 0:
			o.Side, o.Outcome, o.Price = Buy, Yes, p
		case bid:
			o.Side, o.Outcome, o.Price = Sell, No, Payout-p
		case rng.IntN(2) == 0:
			o.Side, o.Outcome, o.Price = Sell, Yes, p
		default:
			o.Side, o.Outcome, o.Price = Buy, No, Payout-p
		}
		subs[i] = o
		takers[i] = crossing
		if !crossing {
			at := (i + 1 + rng.IntN(300)) % n // wraps into the next replay
			cancelsAt[at] = append(cancelsAt[at], i)
		}
	}
	ops := make([]streamOp, 0, n*5/3)
	for i, o := range subs {
		for _, target := range cancelsAt[i] {
			back := i - target // submissions since the target, i.e. id distance at run time
			if back <= 0 {
				back += n
			}
			ops = append(ops, streamOp{cancel: true, back: OrderID(back)})
		}
		ops = append(ops, streamOp{o: o, taker: takers[i]})
	}
	return ops
}

// takersAs returns the stream with every crossing submission given time in force tif, as takers
// who never mean to rest do.
func takersAs(ops []streamOp, tif TimeInForce) []streamOp {
	out := append([]streamOp(nil), ops...)
	for i := range out {
		if out[i].taker {
			out[i].o.TimeInForce = tif
		}
	}
	return out
}

// withAmends returns the stream with an amend of each passive order inserted some way between its
// submission and its cancel: half reduce its quantity, which keeps its place, half requote it a tick
// up or down, which moves it and now and then crosses. About a quarter find their order filled
// already, as cancels do. The stream is otherwise unchanged, so the book keeps a steady size.
func withAmends(ops []streamOp, seed uint64) []streamOp {
	rng := rand.New(rand.NewPCG(seed, 2))
	subAt := []int{} // submission ordinal → index in ops
	for i := range ops {
		if !ops[i].cancel {
			subAt = append(subAt, i)
		}
	}
	n := len(subAt)
	amendsAt := make(map[int][]streamOp) // index in ops → amends to insert before it
	sub := 0
	for i := range ops {
		if !ops[i].cancel {
			sub++
			continue
		}
		// This cancel comes after sub submissions; its target is back before the latest.
		back := int(ops[i].back)
		target := (sub - back + n) % n
		o := ops[subAt[target]].o
		a := streamOp{amend: true, price: o.Price, remaining: max(1, o.Quantity/2)}
		if rng.IntN(2) == 0 {
			a.price = min(max(o.Price+2*rng.IntN(2)-1, MinPrice), MaxPrice)
			a.remaining = o.Quantity
		}
		// Somewhere from just after the target's submission to just before the cancel, in
		// submissions; back then counts from the latest submission at that point.
		at := target + 1 + rng.IntN(back)
		a.back = OrderID(at - target)
		pos := 0 // ahead of the cancels that precede submission at, its target's among them
		if k := at % n; k > 0 {
			pos = subAt[k-1] + 1
		}
		amendsAt[pos] = append(amendsAt[pos], a)
	}
	out := make([]streamOp, 0, len(ops)+len(amendsAt))
	for i := range ops {
		out = append(out, amendsAt[i]...)
		out = append(out, ops[i])
	}
	return out
}

// BenchmarkRealisticStream measures the engine on a realistic mix, effects included. One op is one
// message, a submission, an amend or a cancel: msgs/s counts them all, orders/s counts submissions
// only.
func BenchmarkRealisticStream(b *testing.B) { benchmarkStream(b, realisticStream(1<<16, 1)) }

// BenchmarkRealisticStreamIOC is the realistic stream with every crossing order IOC: what does not
// fill at once is cancelled rather than rests.
func BenchmarkRealisticStreamIOC(b *testing.B) {
	benchmarkStream(b, takersAs(realisticStream(1<<16, 1), IOC))
}

// BenchmarkRealisticStreamFOK is the realistic stream with every crossing order FOK, each counting
// what the book could fill before it matches.
func BenchmarkRealisticStreamFOK(b *testing.B) {
	benchmarkStream(b, takersAs(realisticStream(1<<16, 1), FOK))
}

// BenchmarkRealisticStreamAmend is the realistic stream with one amend of each passive order before
// its cancel: market makers requoting.
func BenchmarkRealisticStreamAmend(b *testing.B) {
	benchmarkStream(b, withAmends(realisticStream(1<<16, 1), 1))
}

func benchmarkStream(b *testing.B, ops []streamOp) {
	book := New(256)
	var r Result
	var id OrderID // the last id submitted
	run := func(op *streamOp) {
		switch {
		case op.cancel:
			_, _ = book.Cancel(id + 1 - op.back)
		case op.amend:
			_ = book.Amend(id+1-op.back, op.price, op.remaining, &r)
		default:
			id++
			op.o.ID = id
			if err := book.Submit(op.o, &r); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Warm up to steady state so that growth of the book's slots is not measured.
	for i := range ops {
		run(&ops[i])
	}
	submits, i := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		op := &ops[i]
		if i++; i == len(ops) {
			i = 0
		}
		if !op.cancel && !op.amend {
			submits++
		}
		run(op)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(submits)/b.Elapsed().Seconds(), "orders/s")
	b.ReportMetric(float64(book.Len()), "resting")
}

// BenchmarkSweep measures a taker that sweeps a deep book: 1,000 resting asks over 50 levels, then
// one bid that takes them all. One op is the 1,001 submissions.
func BenchmarkSweep(b *testing.B) {
	book := New(2048)
	var r Result
	var id OrderID
	fills := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range 1000 {
			id++
			o := Order{ID: id, Account: AccountID(2 + i%50), Side: Sell, Outcome: Yes, Price: 40 + i%50, Quantity: 3}
			if i%2 == 1 {
				o.Side, o.Outcome, o.Price = Buy, No, Payout-o.Price
			}
			if err := book.Submit(o, &r); err != nil {
				b.Fatal(err)
			}
		}
		id++
		if err := book.Submit(Order{ID: id, Account: 1, Side: Buy, Outcome: Yes, Price: 99, Quantity: 3000}, &r); err != nil {
			b.Fatal(err)
		}
		if len(r.Fills) != 1000 || book.Len() != 0 {
			b.Fatalf("swept %d fills, %d left", len(r.Fills), book.Len())
		}
		fills += len(r.Fills)
	}
	b.ReportMetric(float64(fills)/b.Elapsed().Seconds(), "fills/s")
}

// BenchmarkDepth measures a 10-level snapshot of both views of a full book.
func BenchmarkDepth(b *testing.B) {
	book := New(1024)
	var r Result
	id := OrderID(0)
	for p := MinPrice; p <= MaxPrice; p++ {
		if p == 50 {
			continue
		}
		for k := range 5 {
			id++
			o := Order{ID: id, Account: AccountID(k + 1), Side: Buy, Outcome: Yes, Price: p, Quantity: int64(k + 1)}
			if p > 50 {
				o.Side = Sell
			}
			if err := book.Submit(o, &r); err != nil {
				b.Fatal(err)
			}
		}
	}
	var d Depth
	b.ReportAllocs()
	for b.Loop() {
		book.Depth(10, &d)
	}
	if len(d.Yes.Bids) != 10 || len(d.No.Asks) != 10 {
		b.Fatalf("depth %d/%d levels", len(d.Yes.Bids), len(d.No.Asks))
	}
}

// sweepBook fills book with 1,000 resting asks over 50 levels, from 50 accounts, as BenchmarkSweep
// does, and returns the last id used.
func sweepBook(b *testing.B, book *Book, id OrderID, r *Result) OrderID {
	for i := range 1000 {
		id++
		o := Order{ID: id, Account: AccountID(2 + i%50), Side: Sell, Outcome: Yes, Price: 40 + i%50, Quantity: 3}
		if i%2 == 1 {
			o.Side, o.Outcome, o.Price = Buy, No, Payout-o.Price
		}
		if err := book.Submit(o, r); err != nil {
			b.Fatal(err)
		}
	}
	return id
}

// BenchmarkFOKKilled measures FOK orders that a deep book of 1,000 orders over 50 levels cannot
// fill, so that each changes nothing: one short by the levels' totals, which need not look at a
// single order, and one short only once its own orders are left out, which counts all 1,000.
func BenchmarkFOKKilled(b *testing.B) {
	book := New(2048)
	var r Result
	id := sweepBook(b, book, 0, &r)
	for _, bc := range []struct {
		name string
		o    Order
	}{
		{"by the totals", Order{ID: id + 1, Account: 1, Side: Buy, Outcome: Yes, Price: 99, Quantity: 3001, TimeInForce: FOK}},
		{"by its own orders", Order{ID: id + 1, Account: 2, Side: Buy, Outcome: Yes, Price: 99, Quantity: 2950, TimeInForce: FOK}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := book.Submit(bc.o, &r); err != nil || r.Reason != ReasonFOK {
					b.Fatalf("%v, reason %v", err, r.Reason)
				}
			}
		})
	}
}

// BenchmarkFOKSweep is BenchmarkSweep with the sweeping bid FOK: the count of what would fill comes
// on top of the sweep. One op is the 1,001 submissions.
func BenchmarkFOKSweep(b *testing.B) {
	book := New(2048)
	var r Result
	var id OrderID
	b.ReportAllocs()
	for b.Loop() {
		id = sweepBook(b, book, id, &r) + 1
		if err := book.Submit(Order{ID: id, Account: 1, Side: Buy, Outcome: Yes, Price: 99, Quantity: 3000, TimeInForce: FOK}, &r); err != nil {
			b.Fatal(err)
		}
		if len(r.Fills) != 1000 || book.Len() != 0 {
			b.Fatalf("swept %d fills, %d left", len(r.Fills), book.Len())
		}
	}
}

// BenchmarkAmend measures the two kinds of amend of an order in the middle of a book of 1,000: one
// that keeps its place (less remaining) and one that moves it between two levels.
func BenchmarkAmend(b *testing.B) {
	setup := func() (*Book, *Result) {
		book := New(2048)
		var r Result
		for i := range 1000 {
			o := Order{ID: OrderID(i + 1), Account: AccountID(1 + i%50), Side: Buy, Outcome: Yes, Price: 20 + i%20, Quantity: 10}
			if err := book.Submit(o, &r); err != nil {
				b.Fatal(err)
			}
		}
		return book, &r
	}
	b.Run("in place", func(b *testing.B) {
		book, r := setup()
		if err := book.Amend(500, 39, MaxQuantity-1, r); err != nil { // a long way down to count
			b.Fatal(err)
		}
		remaining := int64(MaxQuantity - 1)
		b.ReportAllocs()
		for b.Loop() {
			remaining--
			if err := book.Amend(500, 39, remaining, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reprice", func(b *testing.B) {
		book, r := setup()
		price := 39
		b.ReportAllocs()
		for b.Loop() {
			price ^= 39 ^ 38
			if err := book.Amend(500, price, 10, r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
