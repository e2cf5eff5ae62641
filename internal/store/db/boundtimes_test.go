package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
)

// Migration 022 brings the times a market stored before they were bounded (domain.CheckTime) to
// the bounds, where every answer that carries them can be written again, and leaves the others.
func TestMigrationBoundsStoredTimes(t *testing.T) {
	ctx := context.Background()
	conn, m := testMigrator(t)
	if err := m.MigrateTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	// The times as 14b4c8f stored them: 9999-12-31T23:59:59-23:59 is in year 10000 in UTC, and
	// 0000-01-01T00:00:00+23:59 in year -1.
	late := time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("", -(23*3600+59*60)))
	early := time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("", 23*3600+59*60))
	fine := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	rows := map[uuid.UUID][2]time.Time{uuid.New(): {late, early}, uuid.New(): {early, late}, uuid.New(): {fine, fine}}
	for id, at := range rows {
		if _, err := conn.Exec(ctx, `insert into markets (id, question, category, label_a, label_b, status, closes_at, resolves_at, created_at, updated_at)
			values ($1, 'q', 'c', 'Yes', 'No', 'OPEN', $2, $3, now(), now())`, id, at[0], at[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.MigrateTo(ctx, 22); err != nil {
		t.Fatal(err)
	}
	bound := func(at time.Time) time.Time {
		switch {
		case at.After(domain.LatestTime):
			return domain.LatestTime.Truncate(time.Microsecond) // Postgres keeps microseconds
		case at.Before(domain.EarliestTime):
			return domain.EarliestTime
		}
		return at
	}
	for id, at := range rows {
		var closes, resolves time.Time
		if err := conn.QueryRow(ctx, `select closes_at, resolves_at from markets where id = $1`, id).Scan(&closes, &resolves); err != nil {
			t.Fatal(err)
		}
		if !closes.Equal(bound(at[0])) || !resolves.Equal(bound(at[1])) || !domain.TimeInRange(closes) || !domain.TimeInRange(resolves) {
			t.Errorf("a market stored with closesAt %v and resolvesAt %v has %v and %v after migration 022",
				at[0].UTC(), at[1].UTC(), closes.UTC(), resolves.UTC())
		}
	}
}
