// Package dbtest gives the store's own packages' tests a migrated connection pool on a fresh
// database of the test binary's shared Postgres cluster (see pgtest; the package's TestMain must
// call pgtest.Main), and rows that other concerns would make, written by plain SQL. Tests outside
// internal/store use internal/storetest, which builds the aggregate store.
package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pmx-dev/pmx/internal/pgtest"
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
	err := pool.QueryRow(context.Background(), `insert into accounts (uid, name, available, locked, granted,
		created_at, updated_at) values ($1, $2, $3, 0, $3, $4, $4) returning id`, uuid.New(), name, grant, now).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
