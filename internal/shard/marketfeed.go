package shard

import (
	"context"
	"fmt"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// The market feed (package feed): after a batch's commands have run, and before it commits, each
// market it touched gets its events — the batch's trades in the order they happened, then every
// price level whose resting quantity the batch changed (netted over the batch: a level's final
// quantity), then a change of status — numbered on from the market's last number, and written as
// one row with the batch. A batch that fails drops its markets, which reload their numbers and
// levels from Postgres, so numbers are never used twice nor skipped.

// levels is a book's resting quantity at each YES price, bids and asks: what the feed's level
// events describe.
type levels [2][engine.Payout]int64

// levelsOf reads a book's levels; a nil book (a settled market) has none.
func levelsOf(b *engine.Book, d *engine.Depth) levels {
	var l levels
	if b == nil {
		return l
	}
	b.Depth(engine.Payout, d)
	for _, lv := range d.Yes.Bids {
		l[0][lv.Price] = lv.Quantity
	}
	for _, lv := range d.Yes.Asks {
		l[1][lv.Price] = lv.Quantity
	}
	return l
}

var levelSides = [2]string{"bid", "ask"}

// recordEvents numbers and records the events of every market the batch touched.
func (s *Shard) recordEvents(now time.Time) error {
	if s.cfg.NoEventLog {
		return nil
	}
	for _, m := range s.acc.touched {
		events := s.feed[:0]
		for i := range s.acc.batch.Trades {
			t := &s.acc.batch.Trades[i]
			if t.MarketID != m.id {
				continue
			}
			events = append(events, feed.Event{Type: feed.TypeTrade, Price: t.YesPrice, Quantity: t.Quantity,
				TradeID: t.ID.String(), TakerSide: t.Side, TakerOutcome: t.Outcome, At: now})
		}
		after := levelsOf(m.book, &s.depth)
		for side := range after {
			for p := engine.MinPrice; p <= engine.MaxPrice; p++ {
				if after[side][p] != m.levels[side][p] {
					events = append(events, feed.Event{Type: feed.TypeLevel, Side: levelSides[side], Price: p,
						Quantity: after[side][p], At: now})
				}
			}
		}
		status := ""
		if m.status != m.fedStatus {
			status = string(m.status)
			events = append(events, feed.Event{Type: feed.TypeStatus, Status: status, At: now})
		}
		s.feed = events
		if len(events) == 0 {
			continue
		}
		first := m.eventSeq + 1
		for i := range events {
			events[i].Seq = first + int64(i)
		}
		raw, err := feed.Encode(events)
		if err != nil {
			return fmt.Errorf("while encoding the events of market %s: %w", m.id, err)
		}
		last := first + int64(len(events)) - 1
		s.acc.batch.Events = append(s.acc.batch.Events, store.EventBatch{Market: m.id, First: first, Last: last, Events: raw})
		s.acc.published = append(s.acc.published, feed.Batch{Market: m.id, First: first, Last: last, Status: status, Events: raw})
		s.acc.market(m.id).EventSeq = last
		m.eventSeq, m.levels, m.fedStatus = last, after, m.status
	}
	return nil
}

// fedFrom sets what a market's feed has described so far, as it is loaded.
func (m *marketState) fedFrom(row records.Market, d *engine.Depth) {
	m.eventSeq = row.EventSeq
	m.fedStatus = domain.MarketStatus(row.Status)
	m.levels = levelsOf(m.book, d)
}

// DefaultEventRetention is how long a market's events are kept by default.
const DefaultEventRetention = 24 * time.Hour

// eventPruning is how often the shard deletes events past the retention.
const eventPruning = time.Minute

// pruneEvents deletes the events older than the retention (every eventPruning, see New), keeping
// what pmx audit needs of the accounts' (order_terms, Store.PruneEvents). Every shard of a Set
// but one leaves it to that one; two processes' sweepers may run at once, each deleting and
// copying batches the other does not hold.
func (s *Shard) pruneEvents(ctx context.Context) {
	if n, err := s.cfg.Store.PruneEvents(ctx, time.Now().Add(-s.cfg.EventRetention)); err != nil {
		s.log.Warn("could not delete old feed events, nor keep their orders' terms; trying again later", "err", err)
	} else if n > 0 {
		s.log.Debug("deleted old feed events, their orders' terms kept", "batches", n)
	}
}
