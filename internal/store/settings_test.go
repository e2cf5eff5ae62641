package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/store/db"
)

// TestAccountNamesAnyCase checks that names are unique whatever their case, through both ways of
// opening an account, and that a name in any case finds its account's password.
func TestAccountNamesAnyCase(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	now := time.Now()
	a, err := st.CreateAccountWithPassword(ctx, "Alice", 100, "$hash", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateAccount(ctx, "ALICE", 100, now); !errors.Is(err, ErrConflict) {
		t.Fatalf("CreateAccount(ALICE) with Alice taken: %v, want ErrConflict", err)
	}
	if _, err := st.CreateAccountWithPassword(ctx, "alice", 100, "$other", now); !errors.Is(err, ErrConflict) {
		t.Fatalf("CreateAccountWithPassword(alice) with Alice taken: %v, want ErrConflict", err)
	}
	for _, name := range []string{"Alice", "alice", "ALICE", "aLiCe"} {
		id, hash, err := st.PasswordHash(ctx, name)
		if err != nil || id != a.ID || hash != "$hash" {
			t.Fatalf("PasswordHash(%q) = %d, %q, %v; want %d, $hash", name, id, hash, err, a.ID)
		}
	}
}

// TestAccountNamesMigrationClashes checks that migration 008 stops, naming them, on a database
// whose names already differ only in case, and changes nothing, so that an operator can rename
// and migrate again.
func TestAccountNamesMigrationClashes(t *testing.T) {
	ctx := context.Background()
	_, conn, m := testMigrator(t)
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
