package markets

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// This file reads and writes series' rows (migration 034): the operator records each
// MarketSeries (RecordSeries) and links its instances' rows to it (LinkSeries); the API lists
// them (SeriesPage, Series, SeriesInstances).

const seriesColumns = `id, name, kind, question, description, category, schedule, time_zone, next_instance_at,
	ended_at, created_at, updated_at`

func scanSeries(row pgx.Row) (records.Series, error) {
	var s records.Series
	err := row.Scan(&s.ID, &s.Name, &s.Kind, &s.Question, &s.Description, &s.Category, &s.Schedule, &s.TimeZone,
		&s.NextInstanceAt, &s.EndedAt, &s.CreatedAt, &s.UpdatedAt)
	return s, err
}

// RecordSeries stores a series under its name: a new one with s.ID, or the one of that name
// updated (its id kept, its end undone). It returns the row as stored.
func (s *Rows) RecordSeries(ctx context.Context, r records.Series) (records.Series, error) {
	return scanSeries(s.Pool.QueryRow(ctx, `insert into series (`+seriesColumns+`)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, null, $10, $10)
		on conflict (name) do update set kind = excluded.kind, question = excluded.question,
			description = excluded.description, category = excluded.category, schedule = excluded.schedule,
			time_zone = excluded.time_zone, next_instance_at = excluded.next_instance_at, ended_at = null,
			updated_at = excluded.updated_at
		returning `+seriesColumns,
		r.ID, r.Name, r.Kind, r.Question, r.Description, r.Category, r.Schedule, r.TimeZone, r.NextInstanceAt,
		r.UpdatedAt))
}

// EndSeries marks the series of this name ended at now (its resource was deleted): it is no
// longer listed, and its markets keep their seriesId.
func (s *Rows) EndSeries(ctx context.Context, name string, now time.Time) error {
	_, err := s.Pool.Exec(ctx, `update series set ended_at = $2, updated_at = $2 where name = $1 and ended_at is null`, name, now)
	return err
}

// LinkSeries records that markets, and events with all of their markets, are instances of a
// series. A row already linked keeps its series.
func (s *Rows) LinkSeries(ctx context.Context, series uuid.UUID, markets, events []uuid.UUID) error {
	_, err := s.Pool.Exec(ctx, `
		with e as (update events set series_id = $1 where id = any($3) and series_id is null)
		update markets set series_id = $1 where (id = any($2) or event_id = any($3)) and series_id is null`,
		series, markets, events)
	return err
}

// Series returns one series, ended or not.
func (s *Rows) Series(ctx context.Context, id uuid.UUID) (records.Series, error) {
	r, err := scanSeries(s.Pool.QueryRow(ctx, `select `+seriesColumns+` from series where id = $1`, id))
	return r, db.NotFound(err, "series "+id.String())
}

// SeriesPage lists the series not ended, newest first, after a position (nil: from the newest),
// at most limit of them.
func (s *Rows) SeriesPage(ctx context.Context, after *db.Cursor, limit int) ([]records.Series, error) {
	var afterTime *time.Time
	var afterID *uuid.UUID
	if after != nil {
		afterTime, afterID = &after.CreatedAt, &after.ID
	}
	rows, err := s.Pool.Query(ctx, `select `+seriesColumns+` from series
		where ended_at is null and ($1::timestamptz is null or (created_at, id) < ($1, $2))
		order by created_at desc, id desc limit $3`, afterTime, afterID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Series, error) { return scanSeries(r) })
}

// SeriesInstances lists a series' instances that are not settled (OPEN or CLOSED), soonest to
// close first: its markets, or for a series of events its events.
func (s *Rows) SeriesInstances(ctx context.Context, r records.Series) ([]records.SeriesInstance, error) {
	query := `select id, coalesce(name, ''), status, closes_at, resolves_at from markets
		where series_id = $1 and event_id is null and status in ('OPEN', 'CLOSED') order by closes_at, id`
	if r.Kind == records.SeriesOfEvents {
		query = `select id, name, status, closes_at, resolves_at from events
			where series_id = $1 and status in ('OPEN', 'CLOSED') order by closes_at, id`
	}
	rows, err := s.Pool.Query(ctx, query, r.ID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (records.SeriesInstance, error) {
		var in records.SeriesInstance
		var status string
		err := row.Scan(&in.ID, &in.Name, &status, &in.ClosesAt, &in.ResolvesAt)
		in.Status = domain.MarketStatus(status)
		return in, err
	})
}
