package bookkeeping

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// TestHealth reads the exchange's health as its owners and times change: a market without an
// owner, one whose owner's heartbeat lapsed and one past its closesAt are counted; one owned by a
// live shard, or closed, or closing in the future, is not.
func TestHealth(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	create := func(status domain.MarketStatus, closesAt *time.Time) records.Market {
		t.Helper()
		m := records.Market{ID: dbtest.Market(t, st.Pool, closesAt)}
		if _, err := st.Pool.Exec(ctx, `update markets set status = $2 where id = $1`, m.ID, status); err != nil {
			t.Fatal(err)
		}
		return m
	}
	assign := func(m records.Market, shard string) {
		t.Helper()
		if _, err := st.Assign(ctx, m.ID, shard); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, unowned, overdue int, shards ...ShardHealth) {
		t.Helper()
		h, err := st.Health(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if h.Unowned != unowned || h.Overdue != overdue || len(h.Shards) != len(shards) {
			t.Fatalf("%s: %+v; want %d unowned, %d overdue, shards %+v", step, h, unowned, overdue, shards)
		}
		for i, want := range shards {
			got := h.Shards[i]
			// The age is the database's now() less the last heartbeat: within a second of the
			// age set, whatever the test's own pace.
			if got.Name != want.Name || got.Markets != want.Markets ||
				got.HeartbeatAge < want.HeartbeatAge || got.HeartbeatAge > want.HeartbeatAge+time.Second {
				t.Fatalf("%s: shard %d is %+v; want %+v", step, i, got, want)
			}
		}
	}

	check("empty", 0, 0)
	past, future := time.Now().Add(-time.Hour).UTC(), time.Now().Add(time.Hour).UTC()
	a := create(domain.MarketOpen, &future)
	check("an OPEN market without an owner", 1, 0)
	if _, err := st.Register(ctx, "s1", "s1:1", ""); err != nil {
		t.Fatal(err)
	}
	assign(a, "s1")
	check("owned by a live shard", 0, 0, ShardHealth{Name: "s1", Markets: 1})
	b := create(domain.MarketOpen, &past)
	assign(b, "s1")
	create(domain.MarketClosed, &past)
	check("one past its closesAt", 0, 1, ShardHealth{Name: "s1", Markets: 2})
	if _, err := st.Pool.Exec(ctx, `update shards set heartbeat_at = now() - interval '2 minutes' where name = 's1'`); err != nil {
		t.Fatal(err)
	}
	check("its owner's heartbeat lapsed", 2, 1, ShardHealth{Name: "s1", HeartbeatAge: 2 * time.Minute, Markets: 2})

	// Each shard's pool, liveness and reported orders per second, which the operator sums by pool.
	if _, err := st.Register(ctx, "h1", "h1:1", "hot"); err != nil {
		t.Fatal(err)
	}
	inc, err := st.Incarnation(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReportLoad(ctx, "h1", inc, map[uuid.UUID]float64{a.ID: 2.5, b.ID: 4}); err != nil {
		t.Fatal(err)
	}
	h, err := st.Health(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []ShardHealth{{Name: "h1", Pool: "hot", Live: true, Orders: 6.5}, {Name: "s1", Pool: "default", Live: false, Markets: 2}}
	for i, sh := range h.Shards {
		if sh.Name != want[i].Name || sh.Pool != want[i].Pool || sh.Live != want[i].Live || sh.Orders != want[i].Orders {
			t.Errorf("shard %d is %+v, want %+v", i, sh, want[i])
		}
	}
}
