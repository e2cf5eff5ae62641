package shard

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// The dead-man switch. An account arms it through any front (POST /heartbeat), which records the
// deadline in Postgres (store.ArmHeartbeat); every shard asks Postgres every heartbeatSweep for the
// open orders, in the markets it owns, that a passed deadline covers, and cancels them (reason
// HEARTBEAT). Postgres keeps a passed deadline until the orders it covers are gone, so a shard that
// restarts, or takes over a market, finds them too.

// heartbeatSweep is how often a shard looks for orders to cancel: well within the second the
// contract allows after a deadline, with the cancels' own batch.
const heartbeatSweep = 200 * time.Millisecond

// heartbeatCancels bounds the cancels the sweep has in flight at once.
const heartbeatCancels = 64

// cancelTripped cancels the orders passed heartbeat deadlines cover.
func (s *Shard) cancelTripped(ctx context.Context) {
	orders, err := s.cfg.Store.TrippedOrders(ctx, s.cfg.Name)
	if err != nil {
		s.log.Warn("could not read the orders of tripped dead-man switches; trying again shortly", "err", err)
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, heartbeatCancels)
	for _, o := range orders {
		if !s.serves(o.Market, o.Event) {
			continue // another shard of the Set cancels it
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			_, err := s.Cancel(ctx, exchange.CancelRequest{Account: o.Account, Market: o.Market, Seq: o.Seq, Reason: engine.ReasonHeartbeat})
			switch {
			case err == nil:
				s.log.Info("dead-man switch: order cancelled", "account", o.Account, "market", o.Market, "seq", o.Seq)
			case errors.Is(err, domain.ErrOrderNotOpen), errors.Is(err, exchange.ErrNotOwner), errors.Is(err, exchange.ErrStopped):
				// It filled or was cancelled meanwhile, or its market moved: nothing left to do here.
			default:
				s.log.Warn("dead-man switch: could not cancel an order; trying again shortly", "account", o.Account,
					"market", o.Market, "seq", o.Seq, "err", err)
			}
		})
	}
	wg.Wait()
}
