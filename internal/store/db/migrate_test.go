package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store/db"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// testMigrator opens a pool on a new, empty database, with a migrator of its schema on one of its
// connections, for tests that migrate step by step.
func testMigrator(t *testing.T) (*pgx.Conn, *migrate.Migrator) {
	t.Helper()
	ctx := context.Background()
	pool, err := db.Open(ctx, pgtest.NewDatabase(t, pgtest.Shared(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pc, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Release)
	conn := pc.Conn()
	m, err := migrate.NewMigrator(ctx, conn, db.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(db.Migrations()); err != nil {
		t.Fatal(err)
	}
	return conn, m
}

// TestMigrateLeavesANewerSchema: a database a later release has migrated is served as it is, as a
// rolling upgrade needs of the release before it (docs/architecture.md §9), rather than refused.
func TestMigrateLeavesANewerSchema(t *testing.T) {
	ctx := t.Context()
	pool := dbtest.New(t)
	_, known, err := db.Migrate(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "update "+db.VersionTable+" set version = $1", known+1); err != nil {
		t.Fatal(err)
	}
	from, to, err := db.Migrate(ctx, pool)
	if err != nil || from != known+1 || to != known {
		t.Fatalf("Migrate on a schema one version ahead: from %d to %d, %v; want %d, %d, nil", from, to, err, known+1, known)
	}
}
