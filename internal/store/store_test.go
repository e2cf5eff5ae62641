package store

import (
	"context"
	"testing"

	"github.com/pmx-dev/pmx/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newTestStore opens the aggregate store on a new, migrated database (internal/storetest does
// this for other packages, but importing it here would be an import cycle).
func newTestStore(t testing.TB) *Store {
	t.Helper()
	ctx := context.Background()
	st, err := Open(ctx, pgtest.NewDatabase(t, pgtest.Shared(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}
