package shardclient

import (
	"context"
	"net/http"
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/store"
)

// aloneReads bounds how many books OrderBooks reads one by one at once.
const aloneReads = 8

// OrderBooks reads the books of markets as OrderBook reads each (exchange.BooksReader), at about
// the cost of one: their owners and the owners' addresses in one query (store.Routes), then one
// call to each shard that owns some of them (POST /internal/v1/books), the shards at once; a
// market that is not OPEN is answered from that query alone. A market the batch leaves unanswered
// — its shard refused it (a move under way), could not be reached or runs the release before the
// call, or it has no live owner — is read on its own by OrderBook, which follows a move as every
// read does: the batch only saves work, and the answer is OrderBook's.
func (r *Router) OrderBooks(ctx context.Context, ids []uuid.UUID) ([]*exchange.Snapshot, error) {
	routes, err := r.Store.Routes(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]store.Route, len(routes))
	for _, rt := range routes {
		byID[rt.Market] = rt
	}
	out := make([]*exchange.Snapshot, len(ids))
	errs := make([]error, len(ids))
	var alone []int // the indexes read one by one
	owned := map[string][]int{}
	for i, id := range ids {
		rt, ok := byID[id]
		switch {
		case !ok:
			errs[i] = domain.ErrUnknownMarket
		case rt.Status != domain.MarketOpen:
			out[i] = closedBook(rt.Status, rt.EventSeq, rt.LastTradePrice)
		case rt.Address == "":
			alone = append(alone, i) // being scheduled onto a shard: OrderBook waits as for any read
		default:
			owned[rt.Address] = append(owned[rt.Address], i)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for addr, idx := range owned {
		for part := range slices.Chunk(idx, shardproto.MaxMany) {
			wg.Go(func() {
				missed := r.booksOn(ctx, addr, ids, part, byID, out)
				mu.Lock()
				alone = append(alone, missed...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	sem := make(chan struct{}, aloneReads)
	for _, i := range alone {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = r.OrderBook(ctx, ids[i])
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// booksOn asks the shard at addr for the books of ids[i] for each i of idx, into out[i], and
// returns the indexes it did not answer: all of them when the call failed.
func (r *Router) booksOn(ctx context.Context, addr string, ids []uuid.UUID, idx []int, routes map[uuid.UUID]store.Route, out []*exchange.Snapshot) (missed []int) {
	w := shardproto.BooksV1{Markets: make([]uuid.UUID, len(idx)), Epochs: make([]int64, len(idx))}
	for j, i := range idx {
		w.Markets[j], w.Epochs[j] = ids[i], routes[ids[i]].Epoch
	}
	c := &shardClient{base: "http://" + addr, token: r.Token, http: r.client()}
	var answers []shardproto.BookResultV1
	if err := r.noteVersion(c.call(ctx, http.MethodPost, shardproto.PathBooks, w, &answers)); err != nil || len(answers) != len(idx) {
		return idx
	}
	for j, i := range idx {
		if b := answers[j].Book; b != nil && answers[j].Error == nil {
			snap := b.Snapshot()
			out[i] = &snap
		} else {
			missed = append(missed, i)
		}
	}
	return missed
}

// closedBook is the book of a market that is not OPEN, which no shard holds: empty, with the last
// trade price and the feed sequence Postgres records.
func closedBook(status domain.MarketStatus, seq int64, last *int) *exchange.Snapshot {
	snap := exchange.Snapshot{Status: status, Seq: seq}
	if last != nil {
		snap.Depth.Yes.LastTradePrice = *last
		snap.Depth.No.LastTradePrice = engine.Payout - *last
	}
	return &snap
}
