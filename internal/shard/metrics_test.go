package shard

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/pmx-dev/pmx/engine"
)

// TestDatabaseSeconds holds a batch's commit on a lock for a while: the shard's time on Postgres
// (pmx_shard_database_seconds_total) counts the wait, and never adds up to more than the time that
// passed, its batches' round trips taking turns on one connection — so its rate is the share of
// the time that connection was busy. The commits' histogram (pmx_shard_commit_seconds) has one
// observation for each batch, the held commit's in a bucket above the hold, and a sum that is part
// of the time on Postgres (which also counts the first batch's read at its start).
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

	var h, b dto.Metric
	if err := s.metrics.commit.Write(&h); err != nil {
		t.Fatal(err)
	}
	if err := s.metrics.batches.Write(&b); err != nil {
		t.Fatal(err)
	}
	commits := h.GetHistogram()
	if got, want := commits.GetSampleCount(), uint64(b.GetCounter().GetValue()); got != want || got < 2 {
		t.Errorf("%d commits in the histogram, want one for each of the %d batches (2 or more)", got, want)
	}
	if sum := commits.GetSampleSum(); sum < hold.Seconds() || sum > total+1e-9 {
		t.Errorf("the commits took %.6f s in all, want at least the %v hold and at most the %.6f s on Postgres, of which they are a part",
			sum, hold, total)
	}
	var over uint64 // commits that took longer than the hold: the held one
	for _, bucket := range commits.GetBucket() {
		if bucket.GetUpperBound() < hold.Seconds() {
			over = commits.GetSampleCount() - bucket.GetCumulativeCount()
		}
	}
	if over < 1 {
		t.Errorf("no commit counted above the largest bound under the %v hold; buckets %v", hold, commits.GetBucket())
	}
}
