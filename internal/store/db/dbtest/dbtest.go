// Package dbtest gives the store's own packages' tests a migrated connection pool on a fresh
// database of the test binary's shared Postgres cluster (see pgtest; the package's TestMain must
// call pgtest.Main), and rows that other concerns would make, written by plain SQL. Tests outside
// internal/store use internal/storetest, which builds the aggregate store.
package dbtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// New opens a pool on a new, migrated database, closed and dropped when t ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := db.Open(ctx, pgtest.NewDatabase(t, pgtest.Shared(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, _, err := db.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

// Account opens an account named name with grant cents, as the store's CreateAccount does, and
// returns its id.
func Account(t testing.TB, pool *pgxpool.Pool, name string, grant int64) int64 {
	t.Helper()
	var id int64
	now := time.Now().UTC()
	err := pool.QueryRow(context.Background(), `insert into accounts (uid, name, available, granted,
		created_at, updated_at) values ($1, $2, $3, $3, $4, $4) returning id`, uuid.New(), name, grant, now).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Market creates an OPEN market with placeholder text, closing at closesAt (nil: never), as the
// store's CreateMarket does, and returns its id.
func Market(t testing.TB, pool *pgxpool.Pool, closesAt *time.Time) uuid.UUID {
	t.Helper()
	id := db.NewID()
	_, err := pool.Exec(context.Background(), `insert into markets (id, name, question, description, category, url,
		label_a, label_b, status, closes_at, resolves_at, created_at, updated_at)
		values ($1, null, 'q', '', 'c', null, 'Yes', 'No', 'OPEN', $2, null, $3, $3)`, id, closesAt, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Event creates an OPEN event named name with an outcome, and its market, for each key, as the
// store's CreateEvent does, and returns the markets' ids in the keys' order.
func Event(t testing.TB, pool *pgxpool.Pool, name string, keys ...string) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	e := records.Event{ID: db.NewID(), Name: name}
	for _, key := range keys {
		e.Outcomes = append(e.Outcomes, records.EventOutcome{Key: key, Label: key, MarketID: db.NewID()})
	}
	outcomes, err := json.Marshal(e.Outcomes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `insert into events (id, name, question, category, description, url, outcomes, status,
		resolution, closes_at, resolves_at, created_at, updated_at)
		values ($1, $2, 'q', 'c', '', null, $3, 'OPEN', null, null, null, $4, $4)`, e.ID, name, outcomes, now); err != nil {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, len(keys))
	for i, o := range e.Outcomes {
		if _, err := pool.Exec(ctx, `insert into markets (id, name, question, description, category, url,
			label_a, label_b, status, closes_at, resolves_at, created_at, updated_at, event_id, outcome_key)
			values ($1, null, 'q', '', 'c', null, 'Yes', 'No', 'OPEN', null, null, $2, $2, $3, $4)`,
			o.MarketID, now, e.ID, o.Key); err != nil {
			t.Fatal(err)
		}
		ids[i] = o.MarketID
	}
	return ids
}
