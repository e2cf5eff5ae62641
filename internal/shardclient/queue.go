package shardclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/store"
)

// QueuePositions reads where an account's orders stand in their books' queues
// (exchange.QueueReader): one call per market to its owner (POST /internal/v1/queue-positions,
// the owner read fresh from Postgres, as every read that the owner must answer), at most
// aloneReads markets at once. A market that is not OPEN has no resting orders: its orders are
// refused from Postgres. A shard of the release before the call answers 404, and its markets'
// orders are answered exchange.ErrUnavailable (the front's 503).
func (r *Router) QueuePositions(ctx context.Context, account int64, refs []exchange.OrderRef) []exchange.QueueResult {
	out := make([]exchange.QueueResult, len(refs))
	byMarket := map[uuid.UUID][]int{}
	var markets []uuid.UUID
	for i, ref := range refs {
		if _, ok := byMarket[ref.Market]; !ok {
			markets = append(markets, ref.Market)
		}
		byMarket[ref.Market] = append(byMarket[ref.Market], i)
	}
	sem := make(chan struct{}, aloneReads)
	var wg sync.WaitGroup
	for _, m := range markets {
		idx := byMarket[m]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r.queueOf(ctx, account, m, refs, idx, out)
		})
	}
	wg.Wait()
	return out
}

// queueOf answers out[i] for each i of idx, the orders of one market.
func (r *Router) queueOf(ctx context.Context, account int64, market uuid.UUID, refs []exchange.OrderRef, idx []int, out []exchange.QueueResult) {
	fail := func(err error) {
		for _, i := range idx {
			out[i].Err = err
		}
	}
	var answers []shardproto.QueueResultV1
	err := r.onOwner(ctx, market, true, errMarketNotOpen, func(rt route) error {
		w := shardproto.QueuePositionsV1{Account: account, Market: market, Epoch: rt.epoch, Seqs: make([]int64, len(idx))}
		for j, i := range idx {
			w.Seqs[j] = refs[i].Seq
		}
		answers = nil
		if err := rt.client.call(ctx, http.MethodPost, shardproto.PathQueuePositions, w, &answers); err != nil {
			return err
		}
		if len(answers) != len(idx) {
			return fmt.Errorf("the shard answered %d queue positions for %d orders: %w", len(answers), len(idx), exchange.ErrUnavailable)
		}
		for _, a := range answers {
			if a.Error != nil {
				if err := a.Error.Err(http.StatusConflict); errors.Is(err, exchange.ErrNotOwner) {
					return err // a move it has not noticed yet: ask the owner Postgres names
				}
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errMarketNotOpen):
		for _, i := range idx {
			out[i].Err = r.refuseQueueStored(ctx, account, refs[i])
		}
		return
	case errors.Is(err, shardproto.ErrOlderPeer):
		fail(fmt.Errorf("the market's shard cannot read queue positions yet: %w: %w", exchange.ErrUnavailable, err))
		return
	case err != nil:
		fail(err)
		return
	}
	for j, i := range idx {
		a := answers[j]
		switch {
		case a.Error != nil:
			out[i].Err = a.Error.Err(http.StatusConflict)
		case a.Position == nil:
			out[i].Err = fmt.Errorf("the shard answered an order with neither a position nor an error: %w", exchange.ErrUnavailable)
		default:
			p, ok := a.Position.QueuePosition()
			if !ok {
				out[i].Err = fmt.Errorf("the shard answered a side or outcome it should not (%q, %q): %w", a.Position.Side, a.Position.Outcome, exchange.ErrUnavailable)
				continue
			}
			out[i].Position = p
		}
	}
}

// refuseQueueStored refuses the queue position of an order of a market no shard holds, by what
// Postgres records of it.
func (r *Router) refuseQueueStored(ctx context.Context, account int64, ref exchange.OrderRef) error {
	o, err := r.Store.OrderBySeq(ctx, ref.Market, ref.Seq)
	if errors.Is(err, store.ErrNotFound) {
		return exchange.RefuseQueuePosition(account, nil)
	}
	if err != nil {
		return fmt.Errorf("while reading the order: %w", err)
	}
	return exchange.RefuseQueuePosition(account, &o)
}
