package engine

import (
	"math/rand/v2"
	"testing"
)

// streamOp is one pre-generated operation of the realistic stream: a submission, or, when cancel
// is set, a cancel of the order submitted back submissions earlier.
type streamOp struct {
	o      Order
	cancel bool
	back   OrderID
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
		ops = append(ops, streamOp{o: o})
	}
	return ops
}

// BenchmarkRealisticStream measures the engine on a realistic mix, effects included. One op is one
// message, a submission or a cancel: msgs/s counts both, orders/s counts submissions only.
func BenchmarkRealisticStream(b *testing.B) {
	ops := realisticStream(1<<16, 1)
	book := New(256)
	var r Result
	var id OrderID // the last id submitted
	run := func(op *streamOp) {
		if op.cancel {
			_, _ = book.Cancel(id + 1 - op.back)
			return
		}
		id++
		op.o.ID = id
		if err := book.Submit(op.o, &r); err != nil {
			b.Fatal(err)
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
		if !op.cancel {
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
