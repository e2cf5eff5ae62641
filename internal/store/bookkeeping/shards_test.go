package bookkeeping

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// TestSuccessors checks the shards a pool expects (ExpectShards) as a stopping shard reads them
// (Successors): the names other than its own that are not live — never registered, their
// heartbeat lapsed, or draining — in the order recorded; nothing for a pool that expects nothing,
// nor once the expectation is removed. An expectation recorded again unchanged writes nothing.
func TestSuccessors(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	successors := func(step, pool, self string, want ...string) {
		t.Helper()
		got, err := st.Successors(ctx, pool, self, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: successors of %s in pool %q %q, want %q", step, self, pool, got, want)
		}
	}
	expect := func(pool string, shards ...string) {
		t.Helper()
		if err := st.ExpectShards(ctx, pool, shards); err != nil {
			t.Fatal(err)
		}
	}
	// version is the pool's row's version: its inserting transaction, and the transaction that
	// locked or updated it since, if any.
	version := func(pool string) (xmin, xmax string) {
		t.Helper()
		if err := st.Pool.QueryRow(ctx, `select xmin::text, xmax::text from shard_pools where name = $1`, pool).Scan(&xmin, &xmax); err != nil {
			t.Fatal(err)
		}
		return xmin, xmax
	}

	successors("no ShardPool", "p", "p-shard-0")
	expect("p", "p-shard-0", "p-shard-1", "p-shard-2")
	expect("q", "q-shard-0")
	successors("none registered", "p", "p-shard-0", "p-shard-1", "p-shard-2")
	successors("another pool's", "q", "q-shard-0")
	successors("a shard outside the pool stops", "p", "pmx-shard-0", "p-shard-0", "p-shard-1", "p-shard-2")
	if _, err := st.Register(ctx, "p-shard-2", "p2:1", "p"); err != nil {
		t.Fatal(err)
	}
	successors("p-shard-2 live", "p", "p-shard-0", "p-shard-1")
	if err := st.Drain(ctx, "p-shard-2"); err != nil {
		t.Fatal(err)
	}
	successors("p-shard-2 drains", "p", "p-shard-0", "p-shard-1", "p-shard-2")
	if _, err := st.Register(ctx, "p-shard-2", "p2:2", "p"); err != nil { // its pod back
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `update shards set heartbeat_at = now() - interval '2 minutes' where name = 'p-shard-2'`); err != nil {
		t.Fatal(err)
	}
	successors("p-shard-2's heartbeat lapsed", "p", "p-shard-0", "p-shard-1", "p-shard-2")

	xmin, xmax := version("p")
	expect("p", "p-shard-0", "p-shard-1", "p-shard-2")
	if x, y := version("p"); x != xmin || y != xmax {
		t.Errorf("an unchanged expectation wrote its row: version %s/%s, was %s/%s", x, y, xmin, xmax)
	}
	expect("p", "p-shard-0", "p-shard-1") // scaled down: p-shard-2 goes
	successors("scaled down", "p", "p-shard-0", "p-shard-1")
	if x, _ := version("p"); x == xmin {
		t.Error("a changed expectation left its row as it was")
	}
	expect("p") // the pool deleted
	successors("the pool deleted", "p", "p-shard-0")
	var rows int
	if err := st.Pool.QueryRow(ctx, `select count(*) from shard_pools`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("%d rows (%v) after p's expectation was removed, want q's alone", rows, err)
	}

	expect("", "default-shard-0", "default-shard-1") // "" is the default pool
	successors("the default pool", "default", "default-shard-1", "default-shard-0")
}
