package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
)

// rerun reads how many of the shard's batches found what they reserved from out of date and ran
// again, learning it more surely.
func rerun(t *testing.T, s *Shard) float64 { return counter(t, s.metrics.rerun) }

// counter reads one of the shard's counters.
func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// cash reads an account's available and locked cash.
func (f *fixture) cash(t *testing.T, account int64) (available, locked int64) {
	t.Helper()
	a, err := f.st.Account(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	return a.Available, a.Locked
}

// TestUnlockedBatchOverdrawn takes an account's money from the shard's allocation behind its back
// (as another shard's acquire does), so that the shard's view of it is too high: the placement the
// view pays for runs unlocked, the database refuses its write, and it runs again, acquiring and
// reading, and is refused for want of funds, the account having no more anywhere — with nothing
// of it left in the book or in Postgres.
func TestUnlockedBatchOverdrawn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 10, 10)); err != nil { // learns alice's cash
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 11, 1)); err != nil || rerun(t, s) != 0 {
		t.Fatalf("a placement the view pays for: %v, %v relocked", err, rerun(t, s))
	}
	if _, err := f.st.Pool.Exec(ctx, `update accounts set available = 0 where id = $1`, f.alice); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Pool.Exec(ctx, `update allocations set available = 100 where account_id = $1`, f.alice); err != nil {
		t.Fatal(err)
	}
	_, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 20, 10)) // 200 cents: the view says yes, Postgres no
	if !errors.Is(err, domain.ErrInsufficientFunds) {
		t.Fatalf("placement beyond the account's real funds: %v, want %v", err, domain.ErrInsufficientFunds)
	}
	if n := rerun(t, s); n != 1 {
		t.Errorf("%v batches ran again with locks, want 1", n)
	}
	if available, locked := f.cash(t, f.alice); available != 100 || locked != 10*10+11 {
		t.Errorf("alice has %d available and %d locked, want 100 and %d", available, locked, 10*10+11)
	}
	if n := restingCount(t, f.st, f.market); n != 2 {
		t.Errorf("%d resting orders, want 2", n)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
	// The locked run refreshed the view: a placement within the 100 cents runs unlocked.
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 10, 10)); err != nil {
		t.Fatal(err)
	}
	if n := rerun(t, s); n != 1 {
		t.Errorf("%v batches ran again with locks, want still 1", n)
	}
	if available, _ := f.cash(t, f.alice); available != 0 {
		t.Errorf("alice has %d available, want 0", available)
	}
}

// TestUnlockedBatchDoubted pays an account behind the shard's back (as another shard's fill
// would), so that the shard's view of it is too low, and has the batch's first guess of what it
// needs fall short: two amends of one order in one batch, the second pricing up the quantity the
// first raised. The view seems to pay for both, the second is refused for want of funds in the
// unlocked run, and the batch runs again, acquiring what it needs — where the balance pays for both. An
// unlocked batch never answers such a refusal.
func TestUnlockedBatchDoubted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	if _, err := f.st.Pool.Exec(ctx, `update accounts set available = 20000 where id = $1`, f.alice); err != nil {
		t.Fatal(err)
	}
	o, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 10, 10)) // the view: 20000 - 100
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Pool.Exec(ctx, `update accounts set available = available + 40000 where id = $1`, f.alice); err != nil {
		t.Fatal(err)
	}

	// Hold the loop in a batch of bob's (the shard has no view of him: it locks accounts, and
	// waits for the test's lock) while the two amends queue behind it.
	tx := lockTable(t, f.st, "accounts")
	done := make(chan error, 3)
	go func() { _, err := s.Place(ctx, f.buy(f.bob, engine.No, 40, 1)); done <- err }() // no cross at 50
	waitBlocked(t, f.st)
	amend := func(price int, remaining int64) exchange.AmendRequest {
		return exchange.AmendRequest{Account: f.alice, Market: f.market, Seq: o.Seq, Side: engine.Buy, Outcome: engine.Yes, Price: price, Remaining: remaining}
	}
	results := make(chan records.PlacedOrder, 2)
	go func() { r, err := s.Amend(ctx, amend(0, 1000)); results <- r; done <- err }() // +9,900 cents
	waitQueued(t, s, 1)
	go func() { r, err := s.Amend(ctx, amend(50, 0)); results <- r; done <- err }() // +40,000 cents
	waitQueued(t, s, 2)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// Run again twice: the run that reads acquires what the batch's guess asks, which holds what
	// the views did but not the second amend's rise, so it is doubted again (the guess fell short,
	// and the account has more), and the run with locks acquires everything the account has.
	if n := rerun(t, s); n != 2 {
		t.Errorf("%v batches ran again, want 2", n)
	}
	if available, locked := f.cash(t, f.alice); available != 60000-50*1000 || locked != 50*1000 {
		t.Errorf("alice has %d available and %d locked, want %d and %d", available, locked, 60000-50*1000, 50*1000)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestUnlockedClientOrderIDTakenElsewhere places one client order id in two markets, each on its
// own standalone shard: the second shard's unlocked batch meets the unique index, runs again with
// locks, and refuses the placement as a repeat.
func TestUnlockedClientOrderIDTakenElsewhere(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	other, err := f.st.CreateMarket(ctx, records.Market{ID: uuid.New(), Question: "q2", Category: "c", LabelA: "Yes", LabelB: "No", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	a, b := f.shard(t, ""), f.shard(t, "")
	if _, err := b.Place(ctx, exchange.PlaceRequest{Account: f.alice, Market: other.ID, Side: engine.Buy, Outcome: engine.Yes, Price: 10, Quantity: 1}); err != nil {
		t.Fatal(err) // b learns alice's cash
	}
	withID := func(r exchange.PlaceRequest) exchange.PlaceRequest {
		r.ClientOrderID, r.Placement = "quote-1", "fingerprint"
		return r
	}
	if _, err := a.Place(ctx, withID(f.buy(f.alice, engine.Yes, 20, 1))); err != nil {
		t.Fatal(err)
	}
	_, err = b.Place(ctx, withID(exchange.PlaceRequest{Account: f.alice, Market: other.ID, Side: engine.Buy, Outcome: engine.Yes, Price: 20, Quantity: 1}))
	if !errors.Is(err, domain.ErrClientOrderIDTaken) {
		t.Fatalf("the id's second placement: %v, want %v", err, domain.ErrClientOrderIDTaken)
	}
	if n := rerun(t, b); n != 1 {
		t.Errorf("%v batches ran again with locks, want 1", n)
	}
	if n := restingCount(t, f.st, other.ID); n != 1 {
		t.Errorf("%d resting orders in the second market, want 1", n)
	}
	if err := b.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPipelinedBatchUndone has a batch's commit wait (on a lock the test holds) while the next
// batch is built on the state it leaves, and a placement queued later joins it, then fail: the batch built on it is undone with it, both
// books are rebuilt, the failed batch is answered with ErrUnavailable and the next runs again on
// what Postgres holds, as if the failed one had never been.
func TestPipelinedBatchUndone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	other, err := f.st.CreateMarket(ctx, records.Market{ID: uuid.New(), Question: "q2", Category: "c", LabelA: "Yes", LabelB: "No", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.OrderBook(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 50, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, f.buy(f.bob, engine.No, 10, 1)); err != nil { // the shard learns bob's cash
		t.Fatal(err)
	}
	// Any trade of 7 shares now fails inside the transaction.
	if _, err := f.st.Pool.Exec(ctx, `create function no_sevens() returns trigger language plpgsql as $$
		begin if new.quantity = 7 then raise exception 'no sevens'; end if; return new; end $$;
		create trigger no_sevens before insert on trades for each row execute function no_sevens()`); err != nil {
		t.Fatal(err)
	}
	tx := lockTable(t, f.st, "trades")
	failed := make(chan error, 1)
	go func() { _, err := s.Place(ctx, f.buy(f.bob, engine.No, 50, 7)); failed <- err }()
	waitBlocked(t, f.st) // its commit waits for the test's lock
	next := make(chan []exchange.PlaceResult, 1)
	go func() {
		next <- s.PlaceMany(ctx, []exchange.PlaceRequest{f.buy(f.bob, engine.No, 50, 3),
			{Account: f.bob, Market: other.ID, Side: engine.Buy, Outcome: engine.Yes, Price: 20, Quantity: 2}})
	}()
	poll.Wait(t, 30*time.Second, "the next batch built on the one in flight", func() bool { return counter(t, s.metrics.ahead) == 2 })
	// A placement queued now joins the batch being built.
	third := make(chan error, 1)
	go func() { _, err := s.Place(ctx, f.buy(f.bob, engine.No, 50, 1)); third <- err }()
	poll.Wait(t, 30*time.Second, "the third placement joining it", func() bool { return counter(t, s.metrics.ahead) == 3 })
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-failed; !errors.Is(err, exchange.ErrUnavailable) {
		t.Fatalf("the failing batch answered %v, want %v", err, exchange.ErrUnavailable)
	}
	a := <-next
	if a[0].Err != nil || a[0].Placed.FilledQuantity != 3 || a[1].Err != nil {
		t.Fatalf("the batch built on the failed one: %+v; want 3 filled, and an order in the other market", a)
	}
	if n := restingCount(t, f.st, other.ID); n != 1 {
		t.Errorf("%d orders rest in the other market, want 1", n)
	}
	if err := <-third; err != nil {
		t.Fatal(err)
	}
	snap, err := s.OrderBook(ctx, f.market)
	if err != nil || len(snap.Depth.Yes.Bids) != 1 || snap.Depth.Yes.Bids[0].Quantity != 6 {
		t.Fatalf("book after the failure: %+v, %v; want alice's 6 left", snap, err)
	}
	if available, locked := f.cash(t, f.bob); available != 100_000-10-4*50-40 || locked != 10+40 {
		t.Errorf("bob has %d available and %d locked, want %d and 50", available, locked, 100_000-10-4*50-40)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPipelinedFencingLoss moves a named shard's market while a batch's commit waits at its fence
// and the next batch is built on it: the fence fails the first, the next is undone with it, and
// both are refused as no longer the shard's, with nothing written.
func TestPipelinedFencingLoss(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.st.Assign(ctx, f.market, "shard-a"); err != nil {
		t.Fatal(err)
	}
	s := f.shard(t, "shard-a")
	for _, account := range []int64{f.alice, f.bob} { // the shard learns their cash
		if _, err := s.Place(ctx, f.buy(account, engine.Yes, 10, 1)); err != nil {
			t.Fatal(err)
		}
	}
	before := orderCount(t, f.st)
	// The move, uncommitted: the next commit's fence waits for it.
	tx, err := f.st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // before the shard stops, if the test fails
	if _, err := tx.Exec(ctx, `update markets set shard = 'shard-b', epoch = epoch + 1 where id = $1`, f.market); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 20, 1)); first <- err }()
	waitBlocked(t, f.st)
	next := make(chan error, 1)
	go func() { _, err := s.Place(ctx, f.buy(f.bob, engine.No, 80, 1)); next <- err }() // crosses the first
	poll.Wait(t, 30*time.Second, "the next batch built on the one in flight", func() bool { return counter(t, s.metrics.ahead) == 1 })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []chan error{first, next} {
		if err := <-c; !errors.Is(err, exchange.ErrNotOwner) {
			t.Fatalf("a placement after the move: %v, want %v", err, exchange.ErrNotOwner)
		}
	}
	if got := orderCount(t, f.st); got != before {
		t.Errorf("%d orders after the move, %d before", got, before)
	}
	if n := rerun(t, s); n < 1 {
		t.Errorf("%v batches ran again, want the fenced one", n)
	}
}

// sell is a sale of shares an account holds.
func (f *fixture) sell(account int64, outcome engine.Outcome, price int, qty int64) exchange.PlaceRequest {
	return exchange.PlaceRequest{Account: account, Market: f.market, Side: engine.Sell, Outcome: outcome, Price: price, Quantity: qty}
}

// holding reads an account's shares of an outcome in the fixture's market, and how many of them
// are locked in sales.
func (f *fixture) holding(t *testing.T, account int64, outcome engine.Outcome) (quantity, locked int64) {
	t.Helper()
	err := f.st.Pool.QueryRow(context.Background(), `select coalesce(sum(quantity), 0), coalesce(sum(locked_quantity), 0)
		from positions where account_id = $1 and market_id = $2 and outcome = $3`, account, f.market, outcome.String()).Scan(&quantity, &locked)
	if err != nil {
		t.Fatal(err)
	}
	return quantity, locked
}

// fill has alice buy qty YES at 50 from bob, who buys as many NO at 50 (a YES ask at 50).
func (f *fixture) fill(t *testing.T, s *Shard, qty int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 50, qty)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, f.buy(f.bob, engine.No, 50, qty)); err != nil {
		t.Fatal(err)
	}
}

// saleReads has alice sell qty YES at price, and returns how many batches read what they reserve
// from to place it (0: it reserved from the views).
func (f *fixture) saleReads(t *testing.T, s *Shard, price int, qty int64) float64 {
	t.Helper()
	before := counter(t, s.metrics.read)
	if _, err := s.Place(context.Background(), f.sell(f.alice, engine.Yes, price, qty)); err != nil {
		t.Fatalf("alice's sale of %d YES: %v", qty, err)
	}
	return counter(t, s.metrics.read) - before
}

// TestFirstSaleFromViews sells shares the moment after the fill that brought them, a holding the
// shard never read: the batch that filled it left a view of it, so the sale reserves from the views
// and reads nothing (before, the first sale of every holding read it, and in the pipeline it waited
// for two commits).
func TestFirstSaleFromViews(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	f.fill(t, s, 10)
	if n := f.saleReads(t, s, 60, 4); n != 0 {
		t.Errorf("the first sale read what it reserves from (%v batches): the fill left no view of the holding", n)
	}
	if q, locked := f.holding(t, f.alice, engine.Yes); q != 10 || locked != 4 {
		t.Errorf("alice holds %d YES, %d of them locked; want 10 and 4", q, locked)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHoldingViewFromAFillIsALowerBound fills a holding that already had shares the shard does not
// know of (bought before it started): the view the fill leaves counts only the fill's shares, too
// low, so a sale of more than those reads the holding and is placed, not refused; the read leaves
// the true view, from which the next sale reads nothing.
func TestHoldingViewFromAFillIsALowerBound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first := f.shard(t, "")
	f.fill(t, first, 10)
	first.Stop()

	s := f.shard(t, "") // views of nothing
	f.fill(t, s, 5)     // alice's YES: 15, of which the view knows 5

	// 12 of her 15, beyond the view; then her last 3, within the view the read left.
	if n := f.saleReads(t, s, 60, 12); n != 1 {
		t.Errorf("%v batches read for a sale beyond the view, want 1", n)
	}
	if n := f.saleReads(t, s, 61, 3); n != 0 {
		t.Errorf("%v batches read for a sale within the view the read left (all 15), want none", n)
	}
	if _, err := s.Place(ctx, f.sell(f.alice, engine.Yes, 62, 1)); !errors.Is(err, domain.ErrInsufficientShares) {
		t.Errorf("a sale beyond alice's shares: %v, want %v", err, domain.ErrInsufficientShares)
	}
	if q, locked := f.holding(t, f.alice, engine.Yes); q != 15 || locked != 15 {
		t.Errorf("alice holds %d YES, %d of them locked; want 15 and 15", q, locked)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownAccountJoinsPipelinedBatch places for an account the shard has never read while a
// batch of another account's commits: the shard reads the account on the side (an acquire aside,
// which pmx_shard_acquires_aside_total counts, not pmx_shard_acquires_total) and the placement
// joins the batch built meanwhile, instead of waiting for both commits and a batch of its own.
func TestUnknownAccountJoinsPipelinedBatch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 40, 10)); err != nil { // the shard learns alice's cash
		t.Fatal(err)
	}
	if aside := counter(t, s.metrics.aside); aside != 0 {
		t.Errorf("%v acquires aside for a placement that was not pipelined, want 0", aside)
	}
	acquires := counter(t, s.metrics.acquires)
	tx := lockTable(t, f.st, "orders")
	done := make(chan error, 2)
	go func() { _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 41, 1)); done <- err }()
	waitBlocked(t, f.st) // its commit waits for the test's lock

	// Bob's NO bid at 30 is a YES ask at 70: no trade.
	go func() { _, err := s.Place(ctx, f.buy(f.bob, engine.No, 30, 2)); done <- err }()
	poll.Wait(t, 10*time.Second, "bob's placement pipelined or held", func() bool {
		return counter(t, s.metrics.ahead)+counter(t, s.metrics.held) > 0
	})
	if held, ahead := counter(t, s.metrics.held), counter(t, s.metrics.ahead); held != 0 || ahead != 1 {
		t.Errorf("%v commands held and %v pipelined, want bob's placement pipelined", held, ahead)
	}
	if aside, took := counter(t, s.metrics.aside), counter(t, s.metrics.asideSeconds); aside != 1 || took <= 0 {
		t.Errorf("%v acquires aside taking %v s, want bob's one, taking some time", aside, took)
	}
	if now := counter(t, s.metrics.acquires); now != acquires {
		t.Errorf("pmx_shard_acquires_total went from %v to %v with the acquire aside", acquires, now)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	f.checkLocked(t, f.alice, f.bob)
	if available, locked := f.cash(t, f.bob); available != 100_000-60 || locked != 60 {
		t.Errorf("bob has %d available and %d locked, want %d and 60", available, locked, 100_000-60)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAnsweredWhileAccountsAreAcquired holds the acquire aside of an account the shard meets while
// a batch commits (bob's wallet row locked, so acquire_cash waits for it), and checks that the
// batch in flight is answered meanwhile: alice's placement comes back while bob's acquire still
// waits. Bob's placement then runs after it, as a held command, on what the acquire read. When
// the loop waited for the acquire, alice's answer waited for it too.
func TestAnsweredWhileAccountsAreAcquired(t *testing.T) {
	timeout := accountReadTimeout
	accountReadTimeout = time.Minute // far past the test's own waits, on any machine
	t.Cleanup(func() { accountReadTimeout = timeout })
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	if _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 40, 10)); err != nil { // the shard learns alice's cash
		t.Fatal(err)
	}
	wallet := lockWallet(t, f.st, f.bob)
	orders := lockTable(t, f.st, "orders")
	alice, bob := make(chan error, 1), make(chan error, 1)
	go func() { _, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 41, 1)); alice <- err }()
	waitBlocked(t, f.st) // alice's commit waits for the orders' lock
	go func() { _, err := s.Place(ctx, f.buy(f.bob, engine.No, 30, 2)); bob <- err }()
	err := poll.Until(t.Context(), 30*time.Second, func(ctx context.Context) (bool, error) {
		var n int
		err := f.st.Pool.QueryRow(ctx, `select count(*) from pg_stat_activity
			where wait_event_type = 'Lock' and pid <> pg_backend_pid() and datname = current_database()`).Scan(&n)
		return n >= 2, err // and bob's acquire for his wallet
	})
	if err != nil {
		t.Fatalf("bob's acquire aside does not wait for his wallet: %v", err)
	}
	if err := orders.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-alice:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("alice's placement was not answered while bob's account was being acquired")
	}
	if aside := counter(t, s.metrics.aside); aside != 0 {
		t.Fatalf("bob's acquire had come back (%v counted) before alice was answered, want alice answered while it waited", aside)
	}
	select {
	case err := <-bob:
		t.Fatalf("bob's placement was answered (%v) while his account's acquire waited", err)
	default:
	}
	if err := wallet.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-bob; err != nil {
		t.Fatal(err)
	}
	if aside, held := counter(t, s.metrics.aside), counter(t, s.metrics.held); aside != 1 || held != 1 {
		t.Errorf("%v acquires aside and %v commands held, want bob's one of each", aside, held)
	}
	f.checkLocked(t, f.alice, f.bob)
	if available, locked := f.cash(t, f.bob); available != 100_000-60 || locked != 60 {
		t.Errorf("bob has %d available and %d locked, want %d and 60", available, locked, 100_000-60)
	}
	if err := s.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
}
