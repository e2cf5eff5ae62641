package apiserver

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/feed"
)

// feedLog is where the feed's hub reads what it did not see live: books from the Exchange (the
// owning shard), events and markets' last seqs from Postgres.
type feedLog struct {
	store    FeedLog
	exchange Exchange
}

func (s *Server) feedLog() feedLog { return feedLog{store: s.cfg.Store, exchange: s.cfg.Exchange} }

func (l feedLog) Book(ctx context.Context, market uuid.UUID) (feed.Book, error) {
	snap, err := l.exchange.OrderBook(ctx, market)
	if err != nil {
		return feed.Book{}, err
	}
	b := feed.Book{Seq: snap.Seq, Status: string(snap.Status), LastPrice: snap.Depth.Yes.LastTradePrice}
	for _, lv := range snap.Depth.Yes.Bids {
		b.Levels[0][lv.Price] = lv.Quantity
	}
	for _, lv := range snap.Depth.Yes.Asks {
		b.Levels[1][lv.Price] = lv.Quantity
	}
	return b, nil
}

func (l feedLog) EventsAfter(ctx context.Context, market uuid.UUID, after int64, limit int) ([]feed.Batch, error) {
	batches, err := l.store.EventsAfter(ctx, market, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]feed.Batch, len(batches))
	for i, b := range batches {
		out[i] = feed.Batch{Market: b.Market, First: b.First, Last: b.Last, Events: b.Events}
	}
	return out, nil
}

func (l feedLog) FirstEvent(ctx context.Context, market uuid.UUID) (int64, error) {
	return l.store.FirstEvent(ctx, market)
}

func (l feedLog) MarketsChanged(ctx context.Context, since time.Time) ([]feed.MarketState, error) {
	changed, err := l.store.MarketsChanged(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make([]feed.MarketState, len(changed))
	for i, m := range changed {
		out[i] = feed.MarketState{Market: m.ID, Status: m.Status, Seq: m.EventSeq, UpdatedAt: m.UpdatedAt, Event: m.Event, Paused: m.Paused}
	}
	return out, nil
}

func (l feedLog) ExchangeHalted(ctx context.Context) (bool, error) {
	return l.store.ExchangeHalted(ctx)
}

func (l feedLog) AccountEventsAfter(ctx context.Context, account int64, after feed.Cursor, limit int, upTo feed.Cursor) ([]feed.Batch, error) {
	batches, err := l.store.AccountEventsAfter(ctx, account, after, limit, upTo)
	if err != nil {
		return nil, err
	}
	out := make([]feed.Batch, len(batches))
	for i, b := range batches {
		out[i] = feed.Batch{Account: b.Account, Holder: b.Holder, First: b.First, Last: b.Last, Events: b.Events}
	}
	return out, nil
}

func (l feedLog) AccountFeed(ctx context.Context, account int64) ([]feed.AccountStream, error) {
	streams, err := l.store.AccountFeed(ctx, account)
	if err != nil {
		return nil, err
	}
	out := make([]feed.AccountStream, len(streams))
	for i, st := range streams {
		out[i] = feed.AccountStream(st)
	}
	return out, nil
}

func (l feedLog) AccountSeqs(ctx context.Context, accounts []int64) (map[int64]feed.Cursor, error) {
	seqs, err := l.store.AccountSeqs(ctx, accounts)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]feed.Cursor, len(seqs))
	for id, c := range seqs {
		out[id] = c
	}
	return out, nil
}
