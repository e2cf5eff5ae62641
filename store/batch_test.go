package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/internal/pgcluster/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestApplyStatements prepares every combination of a batch's write statement on a migrated
// database: each must be valid SQL whose parameters Postgres types as the parts expect, and each
// returns the updated orders exactly when it updates orders.
func TestApplyStatements(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, pgtest.NewDatabase(t, pgtest.Shared(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := st.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if applySQL[0] != "" {
		t.Errorf("an empty batch has a statement: %q", applySQL[0])
	}
	for mask := 1; mask < len(applySQL); mask++ {
		sd, err := conn.Conn().Prepare(ctx, fmt.Sprintf("apply_%d", mask), applySQL[mask])
		if err != nil {
			t.Fatalf("parts %06b: %v\n%s", mask, err, applySQL[mask])
		}
		want := 1
		for i, p := range applyParts {
			if mask&(1<<i) != 0 {
				want += p.args
			}
		}
		if len(sd.ParamOIDs) != want {
			t.Errorf("parts %06b: %d parameters, want %d", mask, len(sd.ParamOIDs), want)
		}
		if updates := mask&(1<<1) != 0; updates != (len(sd.Fields) == len(strings.Split(updatedOrderColumns, ","))) {
			t.Errorf("parts %06b: returns %d columns", mask, len(sd.Fields))
		}
	}
}
