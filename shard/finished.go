package shard

import "github.com/pmx-dev/pmx/engine"

// NotOpenError refuses to cancel an order that left its book while the shard held the market:
// filled or cancelled, as Status says. It is ErrOrderNotOpen (errors.Is).
type NotOpenError struct {
	Status string // FILLED, CANCELLED or PARTIALLY_FILLED_CANCELLED
}

func (e *NotOpenError) Error() string { return ErrOrderNotOpen.Error() + ": " + e.Status }
func (e *NotOpenError) Unwrap() error { return ErrOrderNotOpen }

// finishedOrders remembers the final status of the last orders of a market to leave its book
// while the shard held it, so that a cancel arriving too late can say what became of the order
// without a read from Postgres. Only committed states are recorded, and the memory goes with the
// market's state when that is dropped or rebuilt. Used by the loop goroutine only.
type finishedOrders struct {
	status map[int64]engine.Status
	ring   []int64 // sequence numbers in the order recorded; once full, next is the oldest
	next   int
}

// finishedPerMarket bounds each market's memory: ~40 bytes an order.
const finishedPerMarket = 1 << 13

func (f *finishedOrders) put(seq int64, st engine.Status) {
	if f.status == nil {
		f.status = make(map[int64]engine.Status)
	}
	if _, ok := f.status[seq]; ok {
		f.status[seq] = st
		return
	}
	if len(f.ring) < finishedPerMarket {
		f.ring = append(f.ring, seq)
	} else {
		delete(f.status, f.ring[f.next])
		f.ring[f.next] = seq
		f.next = (f.next + 1) % finishedPerMarket
	}
	f.status[seq] = st
}

func (f *finishedOrders) get(seq int64) (engine.Status, bool) {
	st, ok := f.status[seq]
	return st, ok
}
