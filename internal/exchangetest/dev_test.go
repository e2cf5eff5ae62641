package exchangetest

import (
	"os"
	"testing"

	"github.com/pmx-dev/pmx/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	removeBuild()
	os.Exit(code)
}

// TestStandalone runs the contract suite against the standalone exchange.
func TestStandalone(t *testing.T) {
	RunSuite(t, StartDev(t, SuiteLimits))
}

// TestSoak has many accounts trade on several markets at once, then checks every invariant in SQL
// and that every book in memory equals a rebuild from Postgres.
func TestSoak(t *testing.T) {
	tg := StartDev(t)
	steps := 150
	if testing.Short() {
		steps = 30
	}
	acked, stats := Soak(t, tg, SoakConfig{Accounts: 24, Markets: 4, Steps: steps, Seed: 1}, nil)
	t.Logf("%+v", stats)
	if stats.Fills == 0 || stats.Cancelled == 0 || stats.Placed != len(acked) {
		t.Fatalf("soak too tame: %+v", stats)
	}
	CheckInvariants(t, tg)
	var n int
	if err := tg.Store.Pool.QueryRow(t.Context(), `select count(*) from orders`).Scan(&n); err != nil || n != len(acked) {
		t.Fatalf("%d orders stored, %d acknowledged (%v)", n, len(acked), err)
	}
}
