package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The event batches of one market or account ($1) that hold events after seq $2, oldest first,
// until they hold at least $3 of them: each row counts the events after $2 in the rows before it.
var (
	marketEventsAfter  = eventsAfterSQL("market_events", "market_id")
	accountEventsAfter = eventsAfterSQL("account_events", "account_id")
)

func eventsAfterSQL(table, key string) string {
	return `select ` + key + `, first_seq, last_seq, events from (
		  select *, sum(last_seq - greatest(first_seq, $2 + 1) + 1) over (order by first_seq) - (last_seq - greatest(first_seq, $2 + 1) + 1) as before
		  from ` + table + ` where ` + key + ` = $1 and last_seq > $2) e
		where before < $3 order by first_seq`
}

// EventsAfter returns a market's event batches that hold events after seq, oldest first, until
// they hold at least limit of them.
func (s *Store) EventsAfter(ctx context.Context, market uuid.UUID, after int64, limit int) ([]EventBatch, error) {
	rows, err := s.Pool.Query(ctx, marketEventsAfter, market, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EventBatch, error) {
		var b EventBatch
		err := r.Scan(&b.Market, &b.First, &b.Last, &b.Events)
		return b, err
	})
}

// FirstEvent returns the first sequence number of a market's feed still kept: 0 when none is.
func (s *Store) FirstEvent(ctx context.Context, market uuid.UUID) (int64, error) {
	var first *int64
	err := s.Pool.QueryRow(ctx, `select min(first_seq) from market_events where market_id = $1`, market).Scan(&first)
	if err != nil || first == nil {
		return 0, err
	}
	return *first, nil
}

// PruneEvents deletes the event batches, of markets and of accounts, written before cutoff, and
// says how many.
func (s *Store) PruneEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `delete from market_events where created_at < $1`, cutoff)
	if err != nil {
		return 0, err
	}
	accounts, err := s.Pool.Exec(ctx, `delete from account_events where created_at < $1`, cutoff)
	return tag.RowsAffected() + accounts.RowsAffected(), err
}

// AccountEventsAfter returns an account's event batches that hold events after seq, oldest first,
// until they hold at least limit of them.
func (s *Store) AccountEventsAfter(ctx context.Context, account int64, after int64, limit int) ([]AccountEvents, error) {
	rows, err := s.Pool.Query(ctx, accountEventsAfter, account, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AccountEvents, error) {
		var b AccountEvents
		err := r.Scan(&b.Account, &b.First, &b.Last, &b.Events)
		return b, err
	})
}

// AccountFeed is where an account's feed stands: the first number still kept (0 when none is) and
// the last number used.
func (s *Store) AccountFeed(ctx context.Context, account int64) (first, last int64, err error) {
	err = s.Pool.QueryRow(ctx, `select coalesce((select min(first_seq) from account_events where account_id = $1), 0),
		(select event_seq from accounts where id = $1)`, account).Scan(&first, &last)
	return first, last, err
}

// AccountSeqs returns the last feed number of each of the accounts.
func (s *Store) AccountSeqs(ctx context.Context, accounts []int64) (map[int64]int64, error) {
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
}

// MarketsChanged returns the markets updated after since (every market for the zero time): what
// the live feed compares itself with (package feed's sweep).
func (s *Store) MarketsChanged(ctx context.Context, since time.Time) ([]MarketSeq, error) {
	rows, err := s.Pool.Query(ctx, `select id, status, event_seq, updated_at from markets where updated_at > $1`, since)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (MarketSeq, error) {
		var m MarketSeq
		err := r.Scan(&m.ID, &m.Status, &m.EventSeq, &m.UpdatedAt)
		return m, err
	})
}
