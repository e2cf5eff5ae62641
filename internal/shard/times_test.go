package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// TestUnencodableExpiryFailsOnlyItsOrder places, in one batch, an order whose expiry is past year
// 9999 in UTC (which the account feed's JSON cannot carry) between two good orders of other
// accounts: it alone is refused, and the others commit. The public API refuses such a time first;
// this is the shard's own defence, for every caller of its API.
func TestUnencodableExpiryFailsOnlyItsOrder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	carol, err := f.st.CreateAccount(ctx, "carol", 100_000, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := f.shard(t, "")
	far, err := time.Parse(time.RFC3339, "9999-12-31T23:59:59-23:59")
	if err != nil {
		t.Fatal(err)
	}
	bad := f.buy(carol.ID, engine.Yes, 30, 1)
	bad.TimeInForce, bad.ExpiresAt = engine.GTD, far.UTC() // in UTC, as the API passes times on
	results := s.PlaceMany(ctx, []exchange.PlaceRequest{f.buy(f.alice, engine.Yes, 40, 1), bad, f.buy(f.bob, engine.No, 50, 2)})
	for i, want := range []bool{true, false, true} {
		if ok := results[i].Err == nil; ok != want {
			t.Errorf("placement %d: %v, want placed %t", i, results[i].Err, want)
		}
	}
	var e *domain.Error
	if !errors.As(results[1].Err, &e) || e.Code != "out_of_range" || e.Field != "expiresAt" {
		t.Errorf("the far expiry was refused with %v, want out_of_range on expiresAt", results[1].Err)
	}
	if n := orderCount(t, f.st); n != 2 {
		t.Errorf("%d orders stored, want the 2 good ones", n)
	}
	f.checkLocked(t, f.alice, f.bob, carol.ID)
}
