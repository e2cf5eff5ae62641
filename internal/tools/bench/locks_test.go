package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestLockTally(t *testing.T) {
	tally := lockTally{interval: 100 * time.Millisecond}
	if w := tally.waits(); !reflect.DeepEqual(w, LockWaits{IntervalMs: 100}) {
		t.Errorf("no samples: %+v", w)
	}
	for _, s := range []lockSample{
		{row: 0, lock: 1, backends: map[string]int{"running": 2, "Lock:advisory": 1}},
		{row: 3, lock: 3, backends: map[string]int{"Lock:transactionid": 2, "Lock:tuple": 1}},
		{row: 1, lock: 5, backends: map[string]int{"running": 1, "Lock:transactionid": 1, "Lock:advisory": 4}},
		{row: 0, lock: 0}, // every backend idle
	} {
		tally.add(s)
	}
	want := LockWaits{Samples: 4, IntervalMs: 100, RowMean: 1, RowMax: 3, AnyMean: 2.25, AnyMax: 5,
		Backends: map[string]float64{"running": 0.75, "Lock:advisory": 1.25, "Lock:transactionid": 0.75, "Lock:tuple": 0.25}}
	if w := tally.waits(); !reflect.DeepEqual(w, want) {
		t.Errorf("waits %+v, want %+v", w, want)
	}
}

// TestOnPostgres runs the lock sampler and the latency proxy against a real private cluster.
func TestOnPostgres(t *testing.T) {
	dir, err := os.MkdirTemp("", "pmx-bench-locks-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil { // Postgres's own user must enter it when tests run as root
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, stats, _, stop, err := startPostgres(ctx, dir, 100, false, nil, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	connect := func(t *testing.T, url string) *pgx.Conn { // closed at the end of t
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	t.Run("lock waits", func(t *testing.T) {
		lockWaitsOnPostgres(ctx, t, stats, func() *pgx.Conn { return connect(t, cluster.URL()) })
	})
	t.Run("through the proxy", func(t *testing.T) {
		const roundTrip = 20 * time.Millisecond
		p, through, err := proxyDatabase(cluster.URL(), roundTrip)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		c := connect(t, through)
		for i := range 3 {
			start := time.Now()
			var n int
			if err := c.QueryRow(ctx, `select $1::int + 1`, i).Scan(&n); err != nil || n != i+1 {
				t.Fatalf("select through the proxy: %d, %v", n, err)
			}
			if took := time.Since(start); took < roundTrip {
				t.Errorf("a query through the proxy took %v, less than the %v it adds", took, roundTrip)
			}
		}
		if err := c.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		// The connection through the proxy is gone from Postgres as well: only the bench's is left.
		if err := stats.waitClientsGone(ctx); err != nil {
			t.Error(err)
		}
	})
}

// lockWaitsOnPostgres holds a row and an advisory lock in one transaction while two others wait
// for the row (one for the holder's transaction, the next queued behind it on the row) and a third
// for the advisory lock, and checks that each sample counts the first two as waiting on row locks
// and all three as waiting on a lock.
func lockWaitsOnPostgres(ctx context.Context, t *testing.T, stats *pgStats, connect func() *pgx.Conn) {
	exec := func(c *pgx.Conn, sql string) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(stats.conn, `create table held (id int primary key, v int); insert into held values (1, 0)`)
	if s, err := stats.lockWaits(ctx); err != nil || !s.equal(lockSample{}) {
		t.Fatalf("before any lock: %+v, %v", s, err)
	}
	holder := connect()
	exec(holder, `begin`)
	exec(holder, `update held set v = 1 where id = 1`)
	exec(holder, `select pg_advisory_xact_lock(53)`)
	released := false
	release := func() {
		if !released {
			released = true
			if _, err := holder.Exec(ctx, `rollback`); err != nil {
				t.Errorf("rollback: %v", err)
			}
		}
	}
	waiters := []string{`update held set v = 2 where id = 1`, `update held set v = 3 where id = 1`, `select pg_advisory_xact_lock(53)`}
	done := make(chan error, len(waiters))
	for i, sql := range waiters {
		c := connect()
		go func() {
			_, err := c.Exec(ctx, sql)
			if err != nil {
				err = fmt.Errorf("waiter %d: %w", i+1, err)
			}
			done <- err
		}()
		if i == 0 { // the second must queue behind the first, on the row's tuple lock
			waitFor(ctx, t, stats, lockSample{row: 1, lock: 1, backends: map[string]int{"idle in transaction": 1, "Lock:transactionid": 1}})
		}
	}
	defer func() { // whatever happened, the waiters end before their connections close
		release()
		for range waiters {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}()
	// The holder waits for its client in its transaction; the first waiter for the holder's
	// transaction, the second for the row's tuple lock behind it, the third for the advisory lock.
	all := map[string]int{"idle in transaction": 1, "Lock:transactionid": 1, "Lock:tuple": 1, "Lock:advisory": 1}
	waitFor(ctx, t, stats, lockSample{row: 2, lock: 3, backends: all})

	s := startLockSampler(stats, time.Millisecond)
	for s.samples() < 3 && ctx.Err() == nil {
		time.Sleep(time.Millisecond) // not an assertion: until the sampler has taken three
	}
	w, err := s.stop()
	if err != nil {
		t.Fatal(err)
	}
	if w.Samples < 3 || w.IntervalMs != 1 || w.RowMean != 2 || w.RowMax != 2 || w.AnyMean != 3 || w.AnyMax != 3 {
		t.Errorf("the sampler counted %+v; want every sample at 2 waiting on rows, 3 on locks", w)
	}
	if want := map[string]float64{"idle in transaction": 1, "Lock:transactionid": 1, "Lock:tuple": 1, "Lock:advisory": 1}; !maps.Equal(w.Backends, want) {
		t.Errorf("the sampler counted the backends %v; want every sample at %v", w.Backends, want)
	}
	if again, err := s.stop(); err != nil || !reflect.DeepEqual(again, w) {
		t.Errorf("a second stop: %+v, %v", again, err)
	}
	release()
	waitFor(ctx, t, stats, lockSample{}) // and the bench's connection is usable again
}

// waitFor polls the lock waits (backing off to 50ms) until they are want, or fails at ctx's end.
func waitFor(ctx context.Context, t *testing.T, stats *pgStats, want lockSample) {
	t.Helper()
	var last lockSample
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		s, err := stats.lockWaits(ctx)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if err == nil && s.equal(want) {
			return
		}
		last = s
		select {
		case <-ctx.Done():
			t.Fatalf("the lock waits stayed %+v, never %+v", last, want)
		case <-time.After(delay):
		}
	}
}

// equal says whether two samples counted the same (maps.Equal takes an empty count of backends for
// none).
func (s lockSample) equal(o lockSample) bool {
	return s.row == o.row && s.lock == o.lock && maps.Equal(s.backends, o.backends)
}

func TestActivityOf(t *testing.T) {
	for _, c := range []struct{ state, waitType, wait, want string }{
		{"active", "", "", "running"},
		{"active", "IO", "WALSync", "IO:WALSync"},
		{"active", "LWLock", "WALWrite", "LWLock:WALWrite"},
		{"active", "Client", "ClientRead", "Client:ClientRead"}, // mid-pipeline, reading the next message
		{"idle in transaction", "Client", "ClientRead", "idle in transaction"},
		{"idle in transaction (aborted)", "Client", "ClientRead", "idle in transaction (aborted)"},
	} {
		if got := activityOf(c.state, c.waitType, c.wait); got != c.want {
			t.Errorf("activityOf(%q, %q, %q) = %q, want %q", c.state, c.waitType, c.wait, got, c.want)
		}
	}
}
