package shard

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/engine"
)

// TestIdleCashReturns checks the life of a shard's allocation of an account: its first order
// acquires the account's cash (all of it, alone), the order's lock stays in the order, the rest
// goes back to the wallet once the account has been idle for idleReturn, the next order acquires
// again, and a stopping shard returns everything it holds.
func TestIdleCashReturns(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	s := New(Config{Store: f.st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop()
		}
	})
	held := func() (wallet, allocated int64) {
		t.Helper()
		if err := f.st.Pool.QueryRow(ctx, `select a.available, coalesce((select sum(available) from allocations where account_id = a.id), 0)
			from accounts a where a.id = $1`, f.alice).Scan(&wallet, &allocated); err != nil {
			t.Fatal(err)
		}
		return wallet, allocated
	}

	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 40, 10)); err != nil {
		t.Fatal(err)
	}
	if w, a := held(); w != 0 || a != 100_000-400 {
		t.Fatalf("after the first order: wallet %d, allocated %d; want 0 and %d", w, a, 100_000-400)
	}
	if err := s.do(ctx, &command{kind: cmdReturn}); err != nil {
		t.Fatal(err)
	}
	if w, _ := held(); w != 0 {
		t.Fatalf("the return sweep gave back %d of an account used just now", w)
	}
	clock.Add(int64(idleReturn + time.Second))
	if err := s.do(ctx, &command{kind: cmdReturn}); err != nil {
		t.Fatal(err)
	}
	if w, a := held(); w != 100_000-400 || a != 0 {
		t.Fatalf("after the account was idle: wallet %d, allocated %d; want %d and 0", w, a, 100_000-400)
	}
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 41, 10)); err != nil {
		t.Fatalf("an order after the return: %v", err)
	}
	if _, a := held(); a != 100_000-400-410 {
		t.Fatalf("after the next order: allocated %d, want %d", a, 100_000-400-410)
	}
	s.Stop()
	stopped = true
	if w, a := held(); w != 100_000-400-410 || a != 0 {
		t.Fatalf("after the shard stopped: wallet %d, allocated %d; want %d and 0", w, a, 100_000-400-410)
	}
	f.checkLocked(t, f.alice)
}
