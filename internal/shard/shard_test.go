package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/logtest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a migrated database with one OPEN market and two funded accounts.
type fixture struct {
	st     *store.Store
	market uuid.UUID
	alice  int64
	bob    int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st := storetest.New(t)
	return &fixture{st: st, market: storetest.Market(t, st), alice: storetest.Account(t, st, "alice", 100_000),
		bob: storetest.Account(t, st, "bob", 100_000)}
}

func (f *fixture) shard(t *testing.T, name string) *Shard {
	s := New(Config{Store: f.st, Name: name, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(s.Stop)
	return s
}

func (f *fixture) buy(account int64, outcome engine.Outcome, price int, qty int64) exchange.PlaceRequest {
	return exchange.PlaceRequest{Account: account, Market: f.market, Side: engine.Buy, Outcome: outcome, Price: price, Quantity: qty}
}

// checkLocked checks that each account's locked cash, as the API reads it (account_balances), is
// what the engine's rule (engine.OrderState.Lock) says its open orders lock.
func (f *fixture) checkLocked(t *testing.T, accounts ...int64) {
	t.Helper()
	for _, account := range accounts {
		a, err := f.st.Account(context.Background(), account)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := f.st.Pool.Query(context.Background(), `select side, price, quantity, filled_quantity from orders
			where account_id = $1 and status in ('OPEN', 'PARTIALLY_FILLED')`, account)
		if err != nil {
			t.Fatal(err)
		}
		var need int64
		for rows.Next() {
			var side string
			var o engine.OrderState
			if err := rows.Scan(&side, &o.Price, &o.Quantity, &o.Filled); err != nil {
				t.Fatal(err)
			}
			o.Side = engine.Sell
			if side == "BUY" {
				o.Side = engine.Buy
			}
			cash, _ := o.Lock()
			need += cash
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if a.Locked != need {
			t.Errorf("account %d has %d cents locked, its open orders need %d", account, a.Locked, need)
		}
	}
}

func orderCount(t *testing.T, st *store.Store) int {
	var n int
	if err := st.Pool.QueryRow(context.Background(), `select count(*) from orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFencing moves a market from shard A to shard B and checks that A can commit nothing more for
// it: the old epoch is refused in A's own transaction, by the fence its commit checks.
func TestFencing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.shard(t, "shard-a"), f.shard(t, "shard-b")
	if _, err := a.Place(ctx, f.buy(f.alice, engine.Yes, 40, 1)); !errors.Is(err, exchange.ErrNotOwner) {
		t.Fatalf("a shard placed an order in a market nobody assigned it: %v", err)
	}
	if _, err := f.st.Assign(ctx, f.market, "shard-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Place(ctx, f.buy(f.alice, engine.Yes, 40, 1)); err != nil {
		t.Fatalf("the owner could not place: %v", err)
	}
	o, err := f.st.Assign(ctx, f.market, "shard-b")
	if err != nil || o.Epoch != 2 {
		t.Fatalf("reassign: %+v, %v", o, err)
	}
	before := orderCount(t, f.st)
	// A still holds the market in memory under epoch 1: its commit must be refused.
	if _, err := a.Place(ctx, f.buy(f.alice, engine.Yes, 41, 1)); !errors.Is(err, exchange.ErrNotOwner) {
		t.Fatalf("the old owner placed an order after losing the market: %v", err)
	}
	// It ran from its views (the first placement taught it alice's cash), so its commit checked
	// the fence and failed; run again reading ownership first, the placement was refused.
	if n := rerun(t, a); n != 1 {
		t.Errorf("%v batches ran again, want 1: the fence at commit", n)
	}
	if _, err := a.Cancel(ctx, exchange.CancelRequest{Account: f.alice, Market: f.market, Seq: 1}); !errors.Is(err, exchange.ErrNotOwner) {
		t.Fatalf("the old owner cancelled an order after losing the market: %v", err)
	}
	if got := orderCount(t, f.st); got != before {
		t.Fatalf("%d orders after the refused commit, %d before", got, before)
	}
	// B rebuilds the book from Postgres, with A's resting order in it.
	placed, err := b.Place(ctx, f.buy(f.bob, engine.No, 60, 1))
	if err != nil || placed.FilledQuantity != 1 {
		t.Fatalf("the new owner's crossing order: %+v, %v", placed, err)
	}
	if err := b.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRestartUnderOwnName starts a second process under a shard's name while the first still
// runs, as a StatefulSet does after its pod is deleted by force: the new one's registration moves
// the market to a new epoch, the old process can neither commit for it nor load it again, its
// heartbeat tells it to stop, and stopping it does not unregister the new one.
func TestRestartUnderOwnName(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.st.Assign(ctx, f.market, "shard-a"); err != nil {
		t.Fatal(err)
	}
	run := func(s *Shard) (stop func(), done chan error) {
		runCtx, cancel := context.WithCancel(ctx)
		done = make(chan error, 1)
		go func() { done <- s.Run(runCtx, Registration{Address: "127.0.0.1:1", Interval: 20 * time.Millisecond}) }()
		return cancel, done
	}
	epochIs := func(want int64) func() bool {
		return func() bool {
			o, err := f.st.Owner(ctx, f.market)
			return err == nil && o.Shard == "shard-a" && o.Epoch == want
		}
	}
	old := f.shard(t, "shard-a")
	stopOld, oldDone := run(old)
	defer stopOld()
	poll.Wait(t, 10*time.Second, "the first process's registration (epoch 2)", epochIs(2))
	if _, err := old.Place(ctx, f.buy(f.alice, engine.Yes, 40, 1)); err != nil {
		t.Fatalf("the owner could not place: %v", err)
	}

	renewed := f.shard(t, "shard-a")
	stopNew, newDone := run(renewed)
	poll.Wait(t, 10*time.Second, "the second process's registration (epoch 3)", epochIs(3))
	before := orderCount(t, f.st)
	if _, err := old.Place(ctx, f.buy(f.alice, engine.Yes, 41, 1)); !errors.Is(err, exchange.ErrNotOwner) {
		t.Fatalf("the old process placed an order after a new one registered under its name: %v", err)
	}
	if got := orderCount(t, f.st); got != before {
		t.Fatalf("%d orders after the refused commit, %d before", got, before)
	}
	select {
	case err := <-oldDone:
		if !errors.Is(err, store.ErrSuperseded) {
			t.Fatalf("the old process's registration ended with %v, want %v", err, store.ErrSuperseded)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old process kept running after another registered under its name")
	}
	if !epochIs(3)() {
		t.Fatal("the old process, stopping, unregistered the new one")
	}
	placed, err := renewed.Place(ctx, f.buy(f.bob, engine.No, 60, 1))
	if err != nil || placed.FilledQuantity != 1 {
		t.Fatalf("the new process's crossing order: %+v, %v", placed, err)
	}
	if err := renewed.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
	// The new process, stopping, hands the market back.
	stopNew()
	if err := <-newDone; err != nil {
		t.Fatal(err)
	}
	if o, err := f.st.Owner(ctx, f.market); err != nil || o.Shard != "" || o.Epoch != 4 {
		t.Errorf("after the new process stopped: %+v, %v; want no owner at epoch 4", o, err)
	}
}

// TestFailedCommitRebuildsTheBook makes a batch's transaction fail and checks that the book in
// memory did not keep what was never committed.
func TestFailedCommitRebuildsTheBook(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 50, 10)); err != nil {
		t.Fatal(err)
	}
	// Any trade of 7 shares now fails inside the transaction.
	if _, err := f.st.Pool.Exec(ctx, `create function no_sevens() returns trigger language plpgsql as $$
		begin if new.quantity = 7 then raise exception 'no sevens'; end if; return new; end $$;
		create trigger no_sevens before insert on trades for each row execute function no_sevens()`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, f.buy(f.bob, engine.No, 50, 7)); !errors.Is(err, exchange.ErrUnavailable) {
		t.Fatalf("a failing commit answered %v", err)
	}
	snap, err := s.OrderBook(ctx, f.market)
	if err != nil || len(snap.Depth.Yes.Bids) != 1 || snap.Depth.Yes.Bids[0].Quantity != 10 || snap.Depth.Yes.LastTradePrice != 0 {
		t.Fatalf("book after the failed commit: %+v, %v", snap, err)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
	// The next batch works on the book rebuilt from Postgres.
	placed, err := s.Place(ctx, f.buy(f.bob, engine.No, 50, 6))
	if err != nil || placed.FilledQuantity != 6 {
		t.Fatalf("after the failure: %+v, %v", placed, err)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTransitionsInOneBatch checks a close queued behind placements: the placements before it
// trade, the resting orders are cancelled with their locks released, and a placement behind it is
// refused with its reservation returned.
func TestTransitionsInOneBatch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 50, 10)); err != nil {
		t.Fatal(err)
	}
	// Hold the shard's loop inside a batch (its reservation waits for a lock the test holds) so
	// that the next two commands queue up and share the following batch.
	done := make(chan error, 3)
	tx := lockTable(t, f.st, "accounts")
	go func() { _, err := s.Place(ctx, f.buy(f.bob, engine.No, 50, 4)); done <- err }()
	waitBlocked(t, f.st)
	go func() { done <- s.Transition(ctx, f.market, domain.CloseMarket) }()
	waitQueued(t, s, 1)
	go func() { _, err := s.Place(ctx, f.buy(f.bob, engine.No, 50, 1)); done <- err }()
	waitQueued(t, s, 2)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var errs []error
	for range 3 {
		errs = append(errs, <-done)
	}
	var refused int
	for _, err := range errs {
		if errors.Is(err, domain.ErrMarketNotOpen) {
			refused++
		} else if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
	}
	a, err := f.st.Account(ctx, f.alice)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.st.Account(ctx, f.bob)
	if err != nil {
		t.Fatal(err)
	}
	if refused != 1 || a.Locked != 0 || b.Locked != 0 || a.Available != 100_000-200 || b.Available != 100_000-200 {
		t.Fatalf("refused %d; alice %+v; bob %+v", refused, a, b)
	}
}

// waitQueued waits until the shard's queue holds n commands.
func waitQueued(t *testing.T, s *Shard, n int) {
	t.Helper()
	poll.Wait(t, 10*time.Second, fmt.Sprintf("%d commands queued", n), func() bool { return len(s.cmds) >= n })
}

// lockTable takes table's access-exclusive lock in a transaction of the test's own, for a batch
// to wait on: rolling the transaction back releases it, and so does the test's end — before the
// shard stops, when the shard was started first (cleanups run last first) — should it fail sooner.
func lockTable(t *testing.T, st *store.Store, table string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "lock table "+pgx.Identifier{table}.Sanitize()+" in access exclusive mode"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// lockWallet holds account's wallet row (its accounts row) locked in a transaction of its own until
// the test rolls it back or ends, as another shard's acquire or a change of the limits holds it.
func lockWallet(t *testing.T, st *store.Store, account int64) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `select 1 from accounts where id = $1 for update`, account); err != nil {
		t.Fatal(err)
	}
	return tx
}

// waitBlocked waits until a session of st's database other than the caller's waits for a lock
// (the test binary's other databases share the cluster, and pg_stat_activity shows them all).
func waitBlocked(t *testing.T, st *store.Store) {
	t.Helper()
	err := poll.Until(t.Context(), 30*time.Second, func(ctx context.Context) (bool, error) {
		var n int
		err := st.Pool.QueryRow(ctx, `select count(*) from pg_stat_activity
			where wait_event_type = 'Lock' and pid <> pg_backend_pid() and datname = current_database()`).Scan(&n)
		return n > 0, err
	})
	if err != nil {
		t.Fatalf("no session waits for a lock: %v", err)
	}
}

// TestTwoShardsOneMarket has two unnamed shards — two standalone exchanges on one database — place
// orders in the same market, one after the other and then concurrently, so that batches fail while
// the next ones are queued (and built on them). A stale shard's batch fails on the unique (market,
// sequence number) index and its market is reloaded: placements may fail, but no sequence number
// is ever used twice and the locked cash is exactly what the open orders need.
func TestTwoShardsOneMarket(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.shard(t, ""), f.shard(t, "")
	var wg sync.WaitGroup
	var placed, failed atomic.Int64
	place := func(s *Shard, account int64, outcome engine.Outcome, price int) {
		if _, err := s.Place(ctx, f.buy(account, outcome, price, 1)); err != nil {
			failed.Add(1) // ErrUnavailable: nothing written
		} else {
			placed.Add(1)
		}
	}
	for i, s := range []*Shard{a, b, a, b, b, a} {
		place(s, f.alice, engine.Yes, 10+i)
	}
	for g := range 8 {
		s := []*Shard{a, b}[g%2]
		wg.Go(func() {
			for i := range 10 {
				place(s, f.bob, engine.No, 10+i)
			}
		})
	}
	wg.Wait()
	// In the serial phase the shard that did not place last is always stale: its batch writes a
	// sequence number the other shard took, and is caught, either failing its placement or running
	// again on its book reloaded from Postgres (which of the two depends on timing).
	caught := 0.0
	for _, s := range []*Shard{a, b} {
		caught += rerun(t, s) + counter(t, s.metrics.failures)
	}
	t.Logf("%d of 86 placements failed; %.0f batches caught stale", failed.Load(), caught)
	if caught < 1 {
		t.Error("no batch failed or ran again: a stale shard's batch was not caught")
	}
	var n, distinct int64
	if err := f.st.Pool.QueryRow(ctx, `select count(*), count(distinct seq) from orders where market_id = $1`, f.market).
		Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != placed.Load() || distinct != n {
		t.Errorf("got %d orders with %d distinct sequence numbers; want %d of each", n, distinct, placed.Load())
	}
	f.checkLocked(t, f.alice, f.bob)
}

// TestCancelRefusals cancels orders that are another account's or have left the book. The shard
// decides each refusal where the order lives: from the book, from its memory of finished orders,
// and once that memory is gone (a fresh shard), from Postgres — with the same answer each time.
func TestCancelRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	filled, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 40, 2))
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 30, 1))
	if err != nil {
		t.Fatal(err)
	}
	resting, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 20, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, f.buy(f.bob, engine.No, 60, 2)); err != nil { // fills the first
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, exchange.CancelRequest{Account: f.alice, Market: f.market, Seq: cancelled.Seq}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		account int64
		seq     int64
		want    *domain.Error
	}{
		{"filled", f.alice, filled.Seq, domain.OrderNotOpen("FILLED")},
		{"cancelled", f.alice, cancelled.Seq, domain.OrderNotOpen("CANCELLED")},
		{"another's resting", f.bob, resting.Seq, domain.ErrNotYourOrder},
		{"another's filled", f.bob, filled.Seq, domain.ErrNotYourOrder},
		{"never placed", f.alice, 999, domain.ErrOrderNotOpen},
	}
	check := func(who string, s *Shard) {
		for _, c := range cases {
			_, err := s.Cancel(ctx, exchange.CancelRequest{Account: c.account, Market: f.market, Seq: c.seq})
			var got *domain.Error
			if !errors.As(err, &got) || *got != *c.want {
				t.Errorf("%s, %s: %v, want %v", who, c.name, err, c.want)
			}
		}
	}
	check("the shard that saw them", s)
	s.Stop()
	check("a fresh shard", f.shard(t, ""))
	if n := restingCount(t, f.st, f.market); n != 1 {
		t.Errorf("%d resting orders after the refused cancels, want 1 (another account's cancel changed nothing)", n)
	}
}

func restingCount(t *testing.T, st *store.Store, market uuid.UUID) int {
	t.Helper()
	orders, err := st.RestingOrders(context.Background(), market)
	if err != nil {
		t.Fatal(err)
	}
	return len(orders)
}

// TestAbandonedPlacementIsLogged gives up on a placement while its batch waits for a lock: the
// caller gets its context's error at once, and once the batch commits the shard logs that the
// order was placed, with its id.
func TestAbandonedPlacementIsLogged(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var logs logtest.Buffer
	s := New(Config{Store: f.st, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(s.Stop)
	tx := lockTable(t, f.st, "accounts")
	gaveUp, giveUp := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := s.Place(gaveUp, f.buy(f.alice, engine.Yes, 40, 1)); done <- err }()
	waitBlocked(t, f.st)
	giveUp()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Place after its caller gave up: %v, want context.Canceled", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	poll.Wait(t, 10*time.Second, "the abandoned order logged", func() bool {
		return strings.Contains(logs.String(), "an order whose caller gave up waiting was placed")
	})
	orders, err := f.st.RestingOrders(ctx, f.market)
	if err != nil || len(orders) != 1 || !strings.Contains(logs.String(), "order="+orders[0].ID.String()) {
		t.Fatalf("resting %v (%v); log:\n%s", orders, err, logs.String())
	}
}

// TestStandaloneBatchesAreFenced checks that every batch of a claimed standalone shard, locked or
// unlocked, holds the standalone batches' shared lock (store.ClaimStandalone): a trigger records,
// for each order row a batch writes, whether its transaction holds a shared advisory lock. Placing
// for a new account reads it first (a locked batch); placing again reserves from the views (an
// unlocked one). Once another process has claimed the database, the shard's batches fail and
// write nothing.
func TestStandaloneBatchesAreFenced(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.st.Pool.Exec(ctx, `create table mark_probe (marked boolean);
		create function mark_probe() returns trigger language plpgsql as $$
		begin
			insert into mark_probe select exists (select 1 from pg_locks
				where locktype = 'advisory' and pid = pg_backend_pid() and mode = 'ShareLock' and granted);
			return new;
		end $$;
		create trigger mark_probe after insert or update on orders for each row execute function mark_probe()`); err != nil {
		t.Fatal(err)
	}
	mine := storetest.Claim(t, f.st)
	s := New(Config{Store: f.st, Claim: mine.Token(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(s.Stop)
	for range 3 {
		if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 40, 1)); err != nil {
			t.Fatal(err)
		}
	}
	var rows, unmarked int
	if err := f.st.Pool.QueryRow(ctx, `select count(*), count(*) filter (where not marked) from mark_probe`).Scan(&rows, &unmarked); err != nil {
		t.Fatal(err)
	}
	if rows < 3 || unmarked > 0 {
		t.Errorf("%d of the %d order rows the standalone shard wrote were written without the standalone mark", unmarked, rows)
	}

	// The claim's session ends and another process claims the database: the shard's placements,
	// through the views or reading first, fail and write nothing.
	if err := mine.Close(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.Claim(t, f.st)
	for _, account := range []int64{f.alice, f.bob} {
		if o, err := s.Place(ctx, f.buy(account, engine.Yes, 40, 1)); !errors.Is(err, exchange.ErrUnavailable) {
			t.Errorf("a placement after another process claimed the database: %+v, %v; want ErrUnavailable", o, err)
		}
	}
	var orders int
	if err := f.st.Pool.QueryRow(ctx, `select count(*) from orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if orders != 3 {
		t.Errorf("%d orders in the database, want the 3 placed before the claim was lost", orders)
	}
}
