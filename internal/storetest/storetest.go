// Package storetest gives tests a migrated store on a fresh database of the test binary's shared
// Postgres cluster (see pgtest; the package's TestMain must call pgtest.Main).
package storetest

import (
	"context"
	"testing"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/store"
)

// New opens a store on a new, migrated database, closed and dropped when t ends.
func New(t testing.TB) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.NewDatabase(t, pgtest.Shared(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}
