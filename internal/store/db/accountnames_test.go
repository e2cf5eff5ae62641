package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/internal/store/db"
)

// TestAccountNamesMigrationClashes checks that migration 008 stops, naming them, on a database
// whose names already differ only in case, and changes nothing, so that an operator can rename
// and migrate again.
func TestAccountNamesMigrationClashes(t *testing.T) {
	ctx := context.Background()
	conn, m := testMigrator(t)
	if err := m.MigrateTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `insert into accounts (uid, name, available, locked, granted, created_at, updated_at)
		select gen_random_uuid(), n, 0, 0, 0, now(), now() from unnest(array['bob', 'BOB', 'carol']) n`); err != nil {
		t.Fatal(err)
	}
	err := m.MigrateTo(ctx, 8)
	if err == nil || !strings.Contains(err.Error(), "account names differ only in case: bob (id 1), BOB (id 2)") {
		t.Fatalf("migrating with bob and BOB: %v, want an error naming them", err)
	}
	if v, err := m.GetCurrentVersion(ctx); err != nil || v != 7 {
		t.Fatalf("version %d (%v) after the failed migration, want 7", v, err)
	}
	if _, err := conn.Exec(ctx, `update accounts set name = 'bob-2' where name = 'BOB'`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.MigrateConn(ctx, conn); err != nil {
		t.Fatalf("migrating after the rename: %v", err)
	}
}
