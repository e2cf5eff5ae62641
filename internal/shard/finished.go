package shard

import (
	"context"
	"errors"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/boundedmap"
	"github.com/pmx-dev/pmx/internal/store"
)

// A cancel of an order that is not in its book is refused, and the refusal says why: the order is
// another account's (domain.ErrNotYourOrder, checked first, as for an order still resting), or
// it is no longer resting (domain.OrderNotOpen, naming its status). The shard knows this at once
// for the orders that left the book while it held the market (finishedOrders); for older ones it
// reads the order from Postgres, after the batch and off the loop (readFate). The refusal itself is
// the contract's (exchange.RefuseCancel), which the router gives too for a market no shard holds.

// errFateUnknown is a cancel of an order the shard neither has in its book nor remembers: Cancel
// then reads the order to say what became of it. Never returned to callers.
var errFateUnknown = errors.New("the order is not in the book and not remembered")

// readFate refuses a cancel of an order that left the book before the shard's memory of it,
// reading the order from Postgres.
func (s *Shard) readFate(ctx context.Context, r exchange.CancelRequest) error {
	o, err := s.cfg.Store.OrderBySeq(ctx, r.Market, r.Seq)
	if errors.Is(err, store.ErrNotFound) {
		return exchange.RefuseCancel(r.Account, nil)
	}
	if err != nil {
		s.log.Warn("could not read an order to refuse its cancel", "market", r.Market, "seq", r.Seq, "err", err)
		return exchange.ErrUnavailable
	}
	return exchange.RefuseCancel(r.Account, &o)
}

// finished is what became of an order that left its book: its final status, and whose it was.
type finished struct {
	status  engine.Status
	account int64
}

// finishedOrders remembers the last orders of a market to leave its book while the shard held it
// (finishedPerMarket at most, package boundedmap), so that a cancel arriving too late is refused
// without a read from Postgres. Only committed states are recorded, and the memory goes with the
// market's state when that is dropped or rebuilt. Used by the loop goroutine only.
type finishedOrders struct {
	orders *boundedmap.Map[int64, finished] // by sequence number; nil until the first
}

// finishedPerMarket bounds each market's memory: ~50 bytes an order.
const finishedPerMarket = 1 << 13

func (f *finishedOrders) put(seq int64, o finished) {
	if f.orders == nil {
		f.orders = boundedmap.New[int64, finished](finishedPerMarket)
	}
	f.orders.Put(seq, o)
}

func (f *finishedOrders) get(seq int64) (finished, bool) {
	if f.orders == nil {
		return finished{}, false
	}
	return f.orders.Get(seq)
}
