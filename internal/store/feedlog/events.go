package feedlog

import (
	"context"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/store/db"
)

// The event batches of one market or account ($1) that hold events after seq $2, oldest first,
// until they hold at least $3 of them. A key's batches hold contiguous, non-overlapping ranges of
// seqs, so these are the one that began at or before $2 if it holds $2 + 1, then those that begin
// after it, of which the ones beginning by $4 = $2 + $3 (the head) are all needed when there is
// no gap, and those beyond only when the head holds fewer than $3 events (a gap: never in a kept
// feed, but a page must not depend on it). Each part is a range of the primary key bounded by $3
// rows, so a page costs the same whether the feed keeps a hundred batches or a million; a filter
// on last_seq, which no index orders, would read every batch after $2 (issue 34). The running
// count then keeps the batches up to the one that brings the count to $3, as before.
var (
	marketEventsAfter  = eventsAfterSQL("market_events", "market_id")
	accountEventsAfter = eventsAfterSQL("account_events", "account_id")
)

func eventsAfterSQL(table, key string) string {
	cols := key + `, first_seq, last_seq, events`
	// n: how many of a batch's events are after $2; written so that no seq near 2^63 overflows.
	const n = `last_seq - greatest(first_seq - 1, $2)`
	return `with head as (
		  (select ` + cols + ` from ` + table + ` where ` + key + ` = $1 and first_seq <= $2
		   order by first_seq desc limit 1)
		  union all
		  (select ` + cols + ` from ` + table + ` where ` + key + ` = $1 and first_seq > $2 and first_seq <= $4
		   order by first_seq)
		), kept as (
		  select * from head where last_seq > $2
		  union all
		  (select ` + cols + ` from ` + table + ` where ` + key + ` = $1 and first_seq > $4
		     and (select coalesce(sum(` + n + `), 0) from head where last_seq > $2) < $3
		   order by first_seq limit $3)
		)
		select ` + cols + ` from (
		  select *, sum(` + n + `) over (order by first_seq) - (` + n + `) as before from kept) e
		where before < $3 order by first_seq`
}

// eventsAfter runs one of the queries above.
func (s *Log) eventsAfter(ctx context.Context, query string, key any, after int64, limit int) (pgx.Rows, error) {
	return s.Pool.Query(ctx, query, eventsAfterArgs(key, after, limit)...)
}

// eventsAfterArgs are the queries' parameters: a limit below 1 reads as 0, which needs no batch.
func eventsAfterArgs(key any, after int64, limit int) []any {
	limit = max(limit, 0)
	head := after + int64(limit)
	if head < after { // past the last seq there can be
		head = math.MaxInt64
	}
	return []any{key, after, limit, head}
}

// EventsAfter returns a market's event batches that hold events after seq, oldest first, until
// they hold at least limit of them.
func (s *Log) EventsAfter(ctx context.Context, market uuid.UUID, after int64, limit int) ([]db.EventBatch, error) {
	rows, err := s.eventsAfter(ctx, marketEventsAfter, market, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.EventBatch, error) {
		var b db.EventBatch
		err := r.Scan(&b.Market, &b.First, &b.Last, &b.Events)
		return b, err
	})
}

// Where a feed starts: the first key of the primary key's range, one index entry however many
// batches the feed keeps.
const (
	firstEventSQL  = `select min(first_seq) from market_events where market_id = $1`
	accountFeedSQL = `select coalesce((select min(first_seq) from account_events where account_id = $1), 0),
		(select event_seq from accounts where id = $1)`
)

// FirstEvent returns the first sequence number of a market's feed still kept: 0 when none is.
func (s *Log) FirstEvent(ctx context.Context, market uuid.UUID) (int64, error) {
	var first *int64
	err := s.Pool.QueryRow(ctx, firstEventSQL, market).Scan(&first)
	if err != nil || first == nil {
		return 0, err
	}
	return *first, nil
}

// PruneEvents deletes the event batches, of markets and of accounts, written before cutoff, and
// says how many.
func (s *Log) PruneEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `delete from market_events where created_at < $1`, cutoff)
	if err != nil {
		return 0, err
	}
	accounts, err := s.Pool.Exec(ctx, `delete from account_events where created_at < $1`, cutoff)
	return tag.RowsAffected() + accounts.RowsAffected(), err
}

// AccountEventsAfter returns an account's event batches that hold events after seq, oldest first,
// until they hold at least limit of them.
func (s *Log) AccountEventsAfter(ctx context.Context, account int64, after int64, limit int) ([]db.AccountEvents, error) {
	rows, err := s.eventsAfter(ctx, accountEventsAfter, account, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.AccountEvents, error) {
		var b db.AccountEvents
		err := r.Scan(&b.Account, &b.First, &b.Last, &b.Events)
		return b, err
	})
}

// AccountFeed is where an account's feed stands: the first number still kept (0 when none is) and
// the last number used.
func (s *Log) AccountFeed(ctx context.Context, account int64) (first, last int64, err error) {
	err = s.Pool.QueryRow(ctx, accountFeedSQL, account).Scan(&first, &last)
	return first, last, err
}

// AccountSeqs returns the last feed number of each of the accounts.
func (s *Log) AccountSeqs(ctx context.Context, accounts []int64) (map[int64]int64, error) {
	rows, err := s.Pool.Query(ctx, `select id, event_seq from accounts where id = any($1)`, accounts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]int64, len(accounts))
	for rows.Next() {
		var id, seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, err
		}
		out[id] = seq
	}
	return out, rows.Err()
}

// MarketSeq is a market's status and the last number of its feed.
type MarketSeq struct {
	ID        uuid.UUID
	Status    string
	EventSeq  int64
	UpdatedAt time.Time
	Event     *uuid.UUID // the event whose outcome the market answers; nil for a market of its own
	// Paused is what pauses the market apart from the exchange's halt (migration 033): "market",
	// "event" (its event's pause, the wider) or "".
	Paused string
}

// MarketsChanged returns the markets updated after since (every market for the zero time): what
// the live feed compares itself with (package feed's sweep).
func (s *Log) MarketsChanged(ctx context.Context, since time.Time) ([]MarketSeq, error) {
	rows, err := s.Pool.Query(ctx, `select m.id, m.status, m.event_seq, m.updated_at, m.event_id,
		  case when coalesce((select e.paused from events e where e.id = m.event_id), false) then 'event'
		       when m.paused then 'market' else '' end
		from markets m where m.updated_at > $1`, since)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (MarketSeq, error) {
		var m MarketSeq
		err := r.Scan(&m.ID, &m.Status, &m.EventSeq, &m.UpdatedAt, &m.Event, &m.Paused)
		return m, err
	})
}

// ExchangeHalted says whether trading on the whole exchange is halted (migration 033).
func (s *Log) ExchangeHalted(ctx context.Context) (bool, error) {
	var halted bool
	err := s.Pool.QueryRow(ctx, `select exchange from halts where id`).Scan(&halted)
	return halted, err
}
