package batches

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// TestHeartbeat checks the dead-man switch's record: an armed switch covers nothing until its
// deadline passes; then it covers the open orders placed before the deadline, whatever is done to
// the switch afterwards (re-armed, disarmed), and never an order placed after it.
func TestHeartbeat(t *testing.T) {
	ctx := context.Background()
	st, alice, m := newTestTrader(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	conn := testConn(t, st)
	seq := int64(0)
	place := func(at time.Time, status engine.Status) int64 {
		seq++
		b := &Batch{Now: at, Unlocked: true, NewOrders: []records.Order{{ID: db.NewID(), MarketID: m.ID, Side: "SELL", Outcome: "YES", Price: 40,
			Quantity: 1, Status: status, Seq: seq, AccountID: alice.ID}}}
		if _, err := CommitBatch(ctx, conn, b); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	tripped := func() []int64 {
		t.Helper()
		orders, err := st.TrippedOrders(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, o := range orders {
			if o.Market != m.ID || o.Account != alice.ID {
				t.Fatalf("tripped order %+v is not alice's in the test market", o)
			}
			seqs = append(seqs, o.Seq)
		}
		return seqs
	}

	early := place(now.Add(-time.Minute), engine.StatusOpen)
	place(now.Add(-time.Minute), engine.StatusFilled) // not open: never covered
	hb, err := st.ArmHeartbeat(ctx, alice.ID, time.Minute)
	if err != nil || !hb.Armed || hb.Deadline == nil {
		t.Fatalf("arm: %+v, %v", hb, err)
	}
	if got := tripped(); len(got) != 0 {
		t.Fatalf("an armed switch whose deadline is ahead covers %v", got)
	}

	// A deadline a millisecond away passes: the open order placed before it is covered.
	if _, err := st.ArmHeartbeat(ctx, alice.ID, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := poll.Until(ctx, 10*time.Second, func(context.Context) (bool, error) { return len(tripped()) > 0, nil }); err != nil {
		t.Fatal(err)
	}
	if got := tripped(); !slices.Equal(got, []int64{early}) {
		t.Fatalf("after the deadline: %v covered, want [%d]", got, early)
	}
	// Re-armed, and then disarmed, the passed deadline still covers it; a later order is not.
	later := place(time.Now().UTC().Add(time.Second), engine.StatusOpen)
	if hb, err := st.ArmHeartbeat(ctx, alice.ID, time.Minute); err != nil || !hb.Armed {
		t.Fatalf("re-arm: %+v, %v", hb, err)
	}
	if got := tripped(); !slices.Equal(got, []int64{early}) {
		t.Errorf("re-armed: %v covered, want [%d] (not %d, placed after the deadline)", got, early, later)
	}
	if hb, err := st.ArmHeartbeat(ctx, alice.ID, 0); err != nil || hb.Armed || hb.Deadline != nil {
		t.Fatalf("disarm: %+v, %v", hb, err)
	}
	if got := tripped(); !slices.Equal(got, []int64{early}) {
		t.Errorf("disarmed: %v covered, want [%d]", got, early)
	}
	// A named shard sees only the markets it owns: none here.
	if orders, err := st.TrippedOrders(ctx, "shard-0"); err != nil || len(orders) != 0 {
		t.Errorf("a shard that owns no market: %v, %v", orders, err)
	}
	// Once cancelled, nothing is left to cover.
	if _, err := st.Pool.Exec(ctx, `update orders set status = 'CANCELLED', cancel_reason = 'HEARTBEAT' where seq = $1`, early); err != nil {
		t.Fatal(err)
	}
	if got := tripped(); len(got) != 0 {
		t.Errorf("after the cancel: %v covered", got)
	}
}

// TestTrippedOrdersReadsNoOrderUntilTripped checks the sweep every shard runs five times a second:
// while no deadline has passed, it reads no order at all, however many rest. It once hashed every
// resting order of every account in each sweep.
func TestTrippedOrdersReadsNoOrderUntilTripped(t *testing.T) {
	ctx := context.Background()
	st, alice, m := newTestTrader(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	b := &Batch{Now: now, Unlocked: true}
	for seq := range int64(500) {
		b.NewOrders = append(b.NewOrders, openOrder(alice, m, seq+1, "SELL", 40))
	}
	if _, err := CommitBatch(ctx, testConn(t, st), b); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `analyze orders`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ArmHeartbeat(ctx, alice.ID, time.Minute); err != nil { // armed, not passed
		t.Fatal(err)
	}
	for _, shard := range []string{"", "shard-0"} {
		var plan []struct{ Plan map[string]any }
		if err := st.Pool.QueryRow(ctx, `explain (analyze, format json) `+trippedOrdersSQL, shard).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			if n["Relation Name"] == "orders" && n["Actual Loops"].(float64) != 0 {
				t.Errorf("shard %q: with no deadline passed, the sweep read orders (%s, %v rows in %v loops)",
					shard, n["Node Type"], n["Actual Rows"], n["Actual Loops"])
			}
			children, _ := n["Plans"].([]any)
			for _, c := range children {
				walk(c.(map[string]any))
			}
		}
		walk(plan[0].Plan)
	}
}
