package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/feed"
)

// The accounts' feeds (account_events: one stream per account and holder, docs/architecture.md
// §11) are what a bot keeps its orders and fills by, so the audit checks them against the trades:
// every trade of an audited market, from the oldest account event kept on (the feeds' retention
// deletes by age, so every event younger than the oldest kept one is kept), must be a fill event
// in its taker's feed and one in its maker's, once each, for the order, quantity and fee the
// trade row holds; every fill event kept of an audited market must be such a trade's. With the
// whole database audited, each stream must be numbered gaplessly from its first kept row to the
// last number its counter holds (allocations.event_seq; accounts.event_seq for the stream "").

// expectedFill is a trade's fill in one role, as its account's feed must show it.
type expectedFill struct {
	market   uuid.UUID
	seq      int64 // the trade's
	account  int64
	order    uuid.UUID
	quantity int64
	fee      int64
}

// accountFeeds runs the accounts' feeds' checks over the audited markets.
func (a *auditor) accountFeeds(ctx context.Context, markets []market) error {
	var horizon *time.Time
	if err := a.tx.QueryRow(ctx, `select min(created_at) from account_events`).Scan(&horizon); err != nil {
		return fmt.Errorf("audit: reading the accounts' feeds: %w", err)
	}
	ids := make([]uuid.UUID, len(markets))
	audited := make(map[uuid.UUID]bool, len(markets))
	for i, m := range markets {
		ids[i], audited[m.id] = m.id, true
	}
	if horizon == nil {
		var trades bool
		if err := a.tx.QueryRow(ctx, `select exists (select 1 from trades where market_id = any ($1))`, ids).Scan(&trades); err != nil {
			return fmt.Errorf("audit: reading the trades: %w", err)
		}
		if trades {
			a.r.CannotCheck = append(a.r.CannotCheck, "the accounts' feeds: none is kept (past retention, or the shards keep none: --no-event-log)")
		}
		return nil
	}

	// What the trades say each feed must hold.
	rows, err := a.tx.Query(ctx, `select t.id, t.market_id, t.seq, t.quantity, t.taker_account_id, tk.id, t.taker_fee,
		       t.maker_account_id, mk.id, t.maker_fee
		from trades t
		join orders tk on tk.market_id = t.market_id and tk.seq = t.taker_order_seq
		join orders mk on mk.market_id = t.market_id and mk.seq = t.maker_order_seq
		where t.market_id = any ($1) and t.created_at >= $2`, ids, *horizon)
	if err != nil {
		return fmt.Errorf("audit: reading the trades: %w", err)
	}
	want := map[uuid.UUID]expectedFill{} // by fill id
	for rows.Next() {
		var trade uuid.UUID
		var taker, maker expectedFill
		if err := rows.Scan(&trade, &taker.market, &taker.seq, &taker.quantity, &taker.account, &taker.order, &taker.fee,
			&maker.account, &maker.order, &maker.fee); err != nil {
			rows.Close()
			return fmt.Errorf("audit: reading the trades: %w", err)
		}
		maker.market, maker.seq, maker.quantity = taker.market, taker.seq, taker.quantity
		want[apijson.FillID(trade, "TAKER")], want[apijson.FillID(trade, "MAKER")] = taker, maker
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: reading the trades: %w", err)
	}

	// What the feeds hold, and their numbering: every account's when every market is audited, else
	// those of the audited markets' traders.
	feeds := `select account_id, holder, first_seq, last_seq, events from account_events
		order by account_id, holder, first_seq`
	var feedArgs []any
	if !a.opts.all() {
		feeds = `select account_id, holder, first_seq, last_seq, events from account_events
			where account_id in (select taker_account_id from trades where market_id = any ($1)
			                     union select maker_account_id from trades where market_id = any ($1))
			order by account_id, holder, first_seq`
		feedArgs = []any{ids}
	}
	rows, err = a.tx.Query(ctx, feeds, feedArgs...)
	if err != nil {
		return fmt.Errorf("audit: reading the accounts' feeds: %w", err)
	}
	type stream struct {
		account int64
		holder  string
	}
	last := map[stream]int64{}
	seen := map[uuid.UUID]string{} // the fills found, and where
	fill := []byte(`"fill"`)
	var prev stream
	var prevLast int64
	for rows.Next() {
		var s stream
		var first, lastSeq int64
		raw := rows.RawValues()
		if err := rows.Scan(&s.account, &s.holder, &first, &lastSeq, nil); err != nil {
			rows.Close()
			return fmt.Errorf("audit: reading the accounts' feeds: %w", err)
		}
		where := fmt.Sprintf("account_events row (account_id, holder, first_seq) = (%d, '%s', %d)", s.account, s.holder, first)
		if s == prev && first != prevLast+1 {
			a.differ("account feed", uuid.Nil, where, "account %d's stream %q jumps from event %d to %d: events are missing or repeated", s.account, s.holder, prevLast, first)
		}
		prev, prevLast, last[s] = s, lastSeq, lastSeq
		events := raw[4]
		if !bytes.Contains(events, fill) {
			continue
		}
		var evs []feed.AccountEvent
		if err := json.Unmarshal(events, &evs); err != nil {
			a.differ("account feed", uuid.Nil, where, "account %d's events %d to %d do not decode: %v", s.account, first, lastSeq, err)
			continue
		}
		for i, e := range evs {
			if e.Type != feed.AccountFill || e.Fill == nil || !audited[e.Fill.MarketID] {
				continue
			}
			n := first + int64(i)
			at := fmt.Sprintf("account %d's event %d of stream %q", s.account, n, s.holder)
			if before, twice := seen[e.Fill.ID]; twice {
				a.differ("account feed", e.Fill.MarketID, where, "%s repeats fill %s (trade %s), already %s", at, e.Fill.ID, e.Fill.TradeID, before)
				continue
			}
			seen[e.Fill.ID] = at
			w, ok := want[e.Fill.ID]
			switch {
			case !ok:
				a.differ("account feed", e.Fill.MarketID, where, "%s is fill %s of trade %s, which Postgres does not hold", at, e.Fill.ID, e.Fill.TradeID)
			case w.account != s.account || w.order != e.Fill.OrderID || w.quantity != e.Fill.Quantity || w.fee != e.Fill.Fee:
				a.differ("account feed", e.Fill.MarketID, where+fmt.Sprintf(" and trades row (market_id, seq) = (%s, %d)", w.market, w.seq),
					"%s is a %s fill of %d for order %s with fee %d; trade seq %d is %d for account %d's order %s with fee %d",
					at, e.Fill.Role, e.Fill.Quantity, e.Fill.OrderID, e.Fill.Fee, w.seq, w.quantity, w.account, w.order, w.fee)
			}
			a.r.AccountFills++
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: reading the accounts' feeds: %w", err)
	}
	for id, w := range want {
		if _, ok := seen[id]; !ok {
			a.differ("account feed", w.market, fmt.Sprintf("trades row (market_id, seq) = (%s, %d) and account %d's feed (account_events)", w.market, w.seq, w.account),
				"trade seq %d has no fill event in account %d's feed (fill %s, order %s)", w.seq, w.account, id, w.order)
		}
	}
	if !a.opts.all() {
		return nil
	}

	// Each stream ends at its counter.
	rows, err = a.tx.Query(ctx, `select id, '', event_seq from accounts where event_seq > 0
		union all select account_id, holder, event_seq from allocations where event_seq > 0`)
	if err != nil {
		return fmt.Errorf("audit: reading the accounts' feeds' counters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s stream
		var counter int64
		if err := rows.Scan(&s.account, &s.holder, &counter); err != nil {
			return fmt.Errorf("audit: reading the accounts' feeds' counters: %w", err)
		}
		if l, kept := last[s]; kept && l != counter {
			a.differ("account feed", uuid.Nil, fmt.Sprintf("account %d's stream %q (account_events) and its counter (allocations.event_seq, or accounts.event_seq for the stream \"\")", s.account, s.holder),
				"account %d's stream %q ends at event %d; its counter is at %d", s.account, s.holder, l, counter)
		}
	}
	return rows.Err()
}
