package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// EventsAfter returns a market's event batches that hold events after seq, oldest first, until
// they hold at least limit of them.
func (s *Store) EventsAfter(ctx context.Context, market uuid.UUID, after int64, limit int) ([]EventBatch, error) {
	rows, err := s.Pool.Query(ctx, `select market_id, first_seq, last_seq, events from (
		  select *, sum(last_seq - greatest(first_seq, $2 + 1) + 1) over (order by first_seq) - (last_seq - greatest(first_seq, $2 + 1) + 1) as before
		  from market_events where market_id = $1 and last_seq > $2) e
		where before < $3 order by first_seq`, market, after, limit)
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

// PruneEvents deletes the event batches written before cutoff, and says how many.
func (s *Store) PruneEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `delete from market_events where created_at < $1`, cutoff)
	return tag.RowsAffected(), err
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
