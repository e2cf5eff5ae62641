package store

import (
	"context"
	"testing"
	"time"
)

// TestRiskLimitsGuard holds migration 024's guard to its rule: locked cash may grow only within
// max_locked_cash, may fall (and only fall) while over a limit lowered below it, and a write that
// names a version of the limits other than the current one fails; each failure is one a shard
// runs its batch again after (Refused).
func TestRiskLimitsGuard(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	a, err := st.CreateAccount(ctx, "guarded", 10_000, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	lock := func(locked int64) error {
		_, err := st.Pool.Exec(ctx, `update accounts set locked = $2, risk_checked = risk_version where id = $1`, a.ID, locked)
		return err
	}
	limit := int64(100)
	r, err := st.SetRiskLimits(ctx, a.ID, nil, &limit)
	if err != nil || r.MaxPosition != nil || r.MaxLockedCash == nil || *r.MaxLockedCash != 100 || r.LockedCash != 0 || r.Position != 0 {
		t.Fatalf("SetRiskLimits: %+v, %v", r, err)
	}
	for _, step := range []struct {
		locked  int64
		refused bool
	}{{100, false}, {101, true}, {50, false}} {
		if err := lock(step.locked); (err != nil) != step.refused || err != nil && !Refused(err) {
			t.Fatalf("locking %d under a limit of 100: %v, want refused %v", step.locked, err, step.refused)
		}
	}
	if err := lock(90); err != nil {
		t.Fatal(err)
	}
	limit = 40 // below what is locked: allowed
	if _, err := st.SetRiskLimits(ctx, a.ID, nil, &limit); err != nil {
		t.Fatalf("lowering the limit below use: %v", err)
	}
	for _, step := range []struct {
		locked  int64
		refused bool
	}{{95, true}, {80, false}, {85, true}, {80, false}, {40, false}, {41, true}} {
		if err := lock(step.locked); (err != nil) != step.refused || err != nil && !Refused(err) {
			t.Fatalf("locking %d under a limit of 40 lowered below use: %v, want refused %v", step.locked, err, step.refused)
		}
	}
	if _, err := st.SetRiskLimits(ctx, a.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := lock(5000); err != nil {
		t.Fatalf("locking without a limit: %v", err)
	}

	// A write decided by an older version of the limits fails.
	var version int64
	if err := st.Pool.QueryRow(ctx, `select risk_version from accounts where id = $1`, a.ID).Scan(&version); err != nil {
		t.Fatal(err)
	}
	_, err = st.Pool.Exec(ctx, `update accounts set risk_checked = $2 where id = $1`, a.ID, version-1)
	if !Refused(err) {
		t.Fatalf("a write decided by version %d, the current being %d: %v, want it refused", version-1, version, err)
	}
	if _, err := st.Pool.Exec(ctx, `update accounts set risk_checked = $2 where id = $1`, a.ID, version); err != nil {
		t.Fatalf("a write decided by the current version: %v", err)
	}
}
