package markets

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// This file reads and writes events' rows (migration 026). An event and its outcomes' markets are
// made in one transaction, so that no reader sees an event missing a market; what happens to
// them afterwards (close, resolve, conversion) is the owning shard's batch.

const eventColumns = `id, name, question, category, description, url, outcomes, status, resolution,
	closes_at, resolves_at, created_at, updated_at`

// eventRead is what scanEvent reads: eventColumns, the event's pause and the exchange's halt, its
// fee schedule and its series.
const eventRead = eventColumns + `, paused, (select h.exchange from halts h where h.id),
	coalesce(taker_fee_bps, 0), coalesce(maker_fee_bps, 0), series_id`

func scanEvent(row pgx.Row) (records.Event, error) {
	var e records.Event
	var outcomes []byte
	var exchange bool
	err := row.Scan(&e.ID, &e.Name, &e.Question, &e.Category, &e.Description, &e.URL, &outcomes, &e.Status,
		&e.Resolution, &e.ClosesAt, &e.ResolvesAt, &e.CreatedAt, &e.UpdatedAt, &e.Paused, &exchange,
		&e.Fees.Taker, &e.Fees.Maker, &e.SeriesID)
	e.Halted = domain.Of(exchange, e.Paused, false)
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(outcomes, &e.Outcomes); err != nil {
		return e, fmt.Errorf("event %s's outcomes: %w", e.ID, err)
	}
	return e, nil
}

// Event returns one event.
func (s *Rows) Event(ctx context.Context, id uuid.UUID) (records.Event, error) {
	e, err := scanEvent(s.Pool.QueryRow(ctx, `select `+eventRead+` from events where id = $1`, id))
	return e, db.NotFound(err, "event "+id.String())
}

// EventByName returns the event recorded under name (the Event resource's metadata.name).
func (s *Rows) EventByName(ctx context.Context, name string) (records.Event, error) {
	e, err := scanEvent(s.Pool.QueryRow(ctx, `select `+eventRead+` from events where name = $1`, name))
	return e, db.NotFound(err, "event "+name)
}

// CreateEvent stores a new OPEN event and its outcomes' markets, markets[i] answering
// e.Outcomes[i] (whose MarketID must be markets[i].ID), all in one transaction. A taken name, of
// the event or of a market, is db.ErrConflict.
func (s *Rows) CreateEvent(ctx context.Context, e records.Event, markets []records.Market) (records.Event, error) {
	if len(markets) != len(e.Outcomes) {
		return e, fmt.Errorf("event %s has %d outcomes but %d markets", e.Name, len(e.Outcomes), len(markets))
	}
	e.Status = domain.MarketOpen
	e.UpdatedAt = e.CreatedAt
	outcomes, err := json.Marshal(e.Outcomes)
	if err != nil {
		return e, err
	}
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `insert into events (`+eventColumns+`)
			values ($1, $2, $3, $4, $5, $6, $7, $8, null, $9, $10, $11, $11)`,
			e.ID, e.Name, e.Question, e.Category, e.Description, e.URL, outcomes, e.Status, e.ClosesAt,
			e.ResolvesAt, e.CreatedAt); err != nil {
			return err
		}
		for i, m := range markets {
			if m.ID != e.Outcomes[i].MarketID {
				return fmt.Errorf("outcome %q names market %s, not %s", e.Outcomes[i].Key, e.Outcomes[i].MarketID, m.ID)
			}
			if _, err := tx.Exec(ctx, `insert into markets (id, name, question, description, category, url,
				label_a, label_b, status, closes_at, resolves_at, created_at, updated_at, event_id, outcome_key)
				values ($1, $2, $3, $4, $5, $6, $7, $8, 'OPEN', $9, $10, $11, $11, $12, $13)`,
				m.ID, m.Name, m.Question, m.Description, m.Category, m.URL, m.LabelA, m.LabelB, m.ClosesAt,
				m.ResolvesAt, m.CreatedAt, e.ID, e.Outcomes[i].Key); err != nil {
				return err
			}
		}
		return nil
	})
	if db.IsUniqueViolation(err) {
		return e, fmt.Errorf("event %s: %w", e.Name, db.ErrConflict)
	}
	return e, err
}

// UpdateEventText updates an event's descriptive fields, its outcomes' labels and its schedule,
// and its markets' the same way (UpdateMarketText), in one transaction; not statuses, and never
// the outcomes' keys or markets, which are fixed once the event is created.
func (s *Rows) UpdateEventText(ctx context.Context, e records.Event, markets []records.Market, now time.Time) error {
	outcomes, err := json.Marshal(e.Outcomes)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `update events set question = $2, category = $3, description = $4, url = $5,
			outcomes = $6, closes_at = $7, resolves_at = $8, updated_at = $9 where id = $1
			and (question, category, description, url, outcomes, closes_at, resolves_at) is distinct from
			    ($2, $3, $4, $5, $6::jsonb, $7, $8)`,
			e.ID, e.Question, e.Category, e.Description, e.URL, outcomes, e.ClosesAt, e.ResolvesAt, now); err != nil {
			return err
		}
		for _, m := range markets {
			if _, err := tx.Exec(ctx, `update markets set question = $2, description = $3, category = $4, url = $5,
				label_a = $6, label_b = $7, closes_at = $8, resolves_at = $9, updated_at = $10
				where id = $1 and event_id = $11
				and (question, description, category, url, label_a, label_b, closes_at, resolves_at) is distinct from
				    ($2, $3, $4, $5, $6, $7, $8, $9)`,
				m.ID, m.Question, m.Description, m.Category, m.URL, m.LabelA, m.LabelB, m.ClosesAt, m.ResolvesAt,
				now, e.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

// EventMarkets returns an event's markets in the order of its outcomes.
func (s *Rows) EventMarkets(ctx context.Context, e records.Event) ([]records.Market, error) {
	rows, err := s.Pool.Query(ctx, `select `+marketColumns+` from markets where event_id = $1`, e.ID)
	if err != nil {
		return nil, err
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Market, error) { return scanMarket(r) })
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]records.Market, len(ms))
	for _, m := range ms {
		byKey[*m.OutcomeKey] = m
	}
	out := make([]records.Market, 0, len(e.Outcomes))
	for _, o := range e.Outcomes {
		m, ok := byKey[o.Key]
		if !ok {
			return nil, fmt.Errorf("event %s has no market for outcome %q", e.ID, o.Key)
		}
		out = append(out, m)
	}
	return out, nil
}

// EventsPage lists events newest first, of one status when status is not "", after the cursor
// (the created_at and id of the last event of the previous page; zero for the first page).
func (s *Rows) EventsPage(ctx context.Context, status domain.MarketStatus, afterAt time.Time, afterID uuid.UUID, limit int) ([]records.Event, error) {
	rows, err := s.Pool.Query(ctx, `select `+eventRead+` from events
		where ($1 = '' or status = $1) and ($2::timestamptz is null or (created_at, id) < ($2, $3))
		order by created_at desc, id desc limit $4`,
		string(status), nullTime(afterAt), afterID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Event, error) { return scanEvent(r) })
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
