package shard

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// clockedShard starts a shard (named "", the standalone one) whose clock the test moves: the
// returned nanoseconds since the epoch, starting now. The caller stops it.
func (f *fixture) clockedShard() (*Shard, *atomic.Int64) {
	clock := new(atomic.Int64)
	clock.Store(time.Now().UnixNano())
	return New(Config{Store: f.st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return time.Unix(0, clock.Load()) }}), clock
}

// TestIdleCashReturns checks the life of a shard's allocation of an account: its first order
// acquires the account's cash (all of it, alone), the order's lock stays in the order, the rest
// goes back to the wallet once the account has been idle for idleReturn, the next order acquires
// again (each acquire counted, with its time), and a stopping shard returns everything it holds.
func TestIdleCashReturns(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, clock := f.clockedShard()
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
	// Both orders acquired, and the time the batches waited on it is counted with them.
	if n, took := counter(t, s.metrics.acquires), counter(t, s.metrics.acquireSeconds); n != 2 || took <= 0 {
		t.Fatalf("pmx_shard_acquires_total %v, pmx_shard_acquire_seconds_total %v; want 2 and above 0", n, took)
	}
	s.Stop()
	stopped = true
	if w, a := held(); w != 100_000-400-410 || a != 0 {
		t.Fatalf("after the shard stopped: wallet %d, allocated %d; want %d and 0", w, a, 100_000-400-410)
	}
	f.checkLocked(t, f.alice)
}

// TestRoomTakenAfterCashExhausted is a race TestPropertyDemarcation found: a shard's acquire
// takes all of an account's cash, which is still short of an order (the account's cash is
// exhausted), and room enough for it under a maxLockedCash; another holder's acquire then takes
// that room back before the shard's batch reads its allocation. The batch must not answer the
// room it no longer has as a refusal on maxLockedCash, a limit the account is far from (it held
// all the cash, not all the room): it runs again, and the order is refused for funds.
func TestRoomTakenAfterCashExhausted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	poor := storetest.Account(t, f.st, "poor", 300)
	const limit = 10_000
	f.setLimits(t, poor, -1, limit)
	if _, err := f.st.Assign(ctx, f.market, "shard-a"); err != nil {
		t.Fatal(err)
	}
	a := f.shard(t, "shard-a")
	if _, err := a.Place(ctx, f.buy(f.bob, engine.Yes, 10, 1)); err != nil { // loads the market
		t.Fatal(err)
	}
	take := func() { // another holder takes all the room there is, from the wallet's and from shard-a
		t.Helper()
		if _, _, err := f.st.AcquireCash(ctx, "other", []store.Need{{Account: poor, Room: limit}}, 1); err != nil {
			t.Fatal(err)
		}
	}
	take()

	// shard-a's batch reads its markets' ownership after its acquire: hold it there.
	tx := lockTable(t, f.st, "markets")
	placed := make(chan error, 1)
	go func() { _, err := a.Place(ctx, f.buy(poor, engine.Yes, 50, 10)); placed <- err }()
	waitBlocked(t, f.st)
	var room int64
	if err := f.st.Pool.QueryRow(ctx, `select room from allocations where account_id = $1 and holder = 'shard-a'`, poor).Scan(&room); err != nil {
		t.Fatalf("shard-a acquired nothing before its batch read: %v", err)
	}
	if room < 500 {
		t.Fatalf("shard-a acquired %d of room, want the order's 500", room)
	}
	take()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	err := <-placed
	if riskField(err) != "" || !errors.Is(err, domain.ErrInsufficientFunds) {
		t.Fatalf("an order of 500 cents from an account of 300, far under its maxLockedCash of %d: %v, want insufficient funds", limit, err)
	}
}

// TestIdleReturnSkipsHeldWallets checks that the return sweep, which runs on the shard's own
// connection between its batches, waits for no wallet another transaction holds (another shard's
// acquire, a change of the limits): it leaves that account, keeps its view, and gives it back at
// the next sweep once the wallet is free. It once waited for the wallet, and the shard's batches
// with it.
func TestIdleReturnSkipsHeldWallets(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, clock := f.clockedShard()
	t.Cleanup(s.Stop)
	wallet := func(account int64) int64 {
		t.Helper()
		var w int64
		if err := f.st.Pool.QueryRow(ctx, `select available from accounts where id = $1`, account).Scan(&w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	for _, a := range []int64{f.alice, f.bob} {
		if _, err := s.Place(ctx, f.buy(a, engine.Yes, 40, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if w := wallet(f.alice) + wallet(f.bob); w != 0 {
		t.Fatalf("the wallets hold %d after each account's first order, want 0 (acquired whole)", w)
	}

	// Alice's wallet is held by another transaction, as an acquire of another shard holds it.
	other := lockWallet(t, f.st, f.alice)
	clock.Add(int64(idleReturn + time.Second))
	sweep, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.do(sweep, &command{kind: cmdReturn}); err != nil {
		t.Fatalf("the return sweep with alice's wallet held: %v (it waited for the wallet)", err)
	}
	if w := wallet(f.bob); w != 100_000-400 {
		t.Errorf("bob's wallet holds %d after the sweep, want %d: his cash was not returned", w, 100_000-400)
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if w := wallet(f.alice); w != 0 {
		t.Fatalf("alice's wallet holds %d after a sweep that could not take it, want 0", w)
	}

	// The next sweep gives alice's cash back: the shard kept her as idle.
	if err := s.do(ctx, &command{kind: cmdReturn}); err != nil {
		t.Fatal(err)
	}
	if w := wallet(f.alice); w != 100_000-400 {
		t.Errorf("alice's wallet holds %d after the next sweep, want %d", w, 100_000-400)
	}
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 41, 10)); err != nil {
		t.Fatalf("an order after the return: %v", err)
	}
	f.checkLocked(t, f.alice, f.bob)
}
