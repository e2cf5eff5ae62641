package shard

import (
	"context"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/engine"
)

// TestDatabaseSeconds holds a batch's commit on a lock for a while: the shard's time on Postgres
// (pmx_shard_database_seconds_total) counts the wait, and never adds up to more than the time that
// passed, its batches' round trips taking turns on one connection — so its rate is the share of
// the time that connection was busy.
func TestDatabaseSeconds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	start := time.Now()
	s := f.shard(t, "")
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 10, 1)); err != nil {
		t.Fatal(err)
	}
	first := counter(t, s.metrics.database)
	if first <= 0 || first > time.Since(start).Seconds() {
		t.Fatalf("after one placement the shard counted %.6f s on Postgres, want more than 0 and at most the %.3f s that passed",
			first, time.Since(start).Seconds())
	}

	tx := lockTable(t, f.st, "allocations") // the batch's accounts' statement writes alice's
	placed := make(chan error, 1)
	go func() {
		_, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 11, 1))
		placed <- err
	}()
	waitBlocked(t, f.st)
	const hold = 100 * time.Millisecond // the wait to be counted, not a wait for readiness
	held := time.Now()
	time.Sleep(hold)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-placed; err != nil {
		t.Fatal(err)
	}
	waited := time.Since(held)
	total := counter(t, s.metrics.database)
	if got := total - first; got < hold.Seconds() {
		t.Errorf("a batch held %v on a lock added %.6f s to the shard's time on Postgres, want at least %.3f", waited, got, hold.Seconds())
	}
	if elapsed := time.Since(start).Seconds(); total > elapsed {
		t.Errorf("the shard counted %.6f s on Postgres in %.3f s", total, elapsed)
	}
}
