// Package storetest gives tests a migrated store on a fresh database of the test binary's shared
// Postgres cluster (see pgtest; the package's TestMain must call pgtest.Main).
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
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

// Claim claims st's database for a standalone exchange and fences it, as pmx dev does before it
// loads its books (store.ClaimStandalone, Claim.Fence); the claim is given up when t ends.
func Claim(t testing.TB, st *store.Store) *store.Claim {
	t.Helper()
	ctx := context.Background()
	claim, err := st.ClaimStandalone(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { claim.Close(ctx) })
	if err := claim.Fence(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	return claim
}

// Market creates an OPEN market in st, with placeholder text, and returns its id.
func Market(t testing.TB, st *store.Store) uuid.UUID {
	t.Helper()
	m, err := st.CreateMarket(context.Background(), records.Market{ID: uuid.New(), Question: "q", Category: "c",
		LabelA: "Yes", LabelB: "No", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// Account opens an account named name in st with grant cents, and returns its id.
func Account(t testing.TB, st *store.Store, name string, grant int64) int64 {
	t.Helper()
	a, err := st.CreateAccount(context.Background(), name, grant, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}
