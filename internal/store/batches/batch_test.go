package batches

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newTestStore opens the batch writer on a new, migrated database.
func newTestStore(t testing.TB) *Writer {
	t.Helper()
	return New(dbtest.New(t))
}

// testConn holds one of st's connections for the rest of the test.
func testConn(t *testing.T, st *Writer) *pgx.Conn {
	t.Helper()
	pc, err := st.Pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Release)
	return pc.Conn()
}

// lockWallet holds account's wallet row (its accounts row) locked in a transaction of its own until
// the test rolls it back or ends, as another holder's acquire holds it.
func lockWallet(t *testing.T, st *Writer, account int64) pgx.Tx {
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

// newTestTrader opens the batch writer on a migrated database holding one account, alice, and
// one open market.
func newTestTrader(t *testing.T) (*Writer, records.Account, records.Market) {
	t.Helper()
	st := newTestStore(t)
	alice := records.Account{ID: dbtest.Account(t, st.Pool, "alice", 1_000)}
	m := records.Market{ID: dbtest.Market(t, st.Pool, nil)}
	allocateAll(t, st, alice.ID)
	return st, alice, m
}

// allocateAll moves the whole wallet of each account to the allocation of holder "" (a Batch's
// holder when it names none), for batches to spend from (docs/architecture.md §11).
func allocateAll(t *testing.T, st *Writer, accounts ...int64) {
	t.Helper()
	conn := testConn(t, st)
	need := make([]Need, len(accounts))
	for i, a := range accounts {
		need[i] = Need{Account: a, Cash: 1 << 60}
	}
	if _, _, err := Acquire(context.Background(), conn, "", need, 1); err != nil {
		t.Fatal(err)
	}
}

// orderByClientID reads an account's order by its client order id, as the store's
// OrderByClientID does (package markets): db.ErrNotFound when it has none.
func orderByClientID(ctx context.Context, st *Writer, account int64, clientOrderID string) (records.Order, error) {
	o, err := db.ScanOrder(st.Pool.QueryRow(ctx, `select `+db.OrderColumns+` from orders
		where account_id = $1 and client_order_id = $2`, account, clientOrderID))
	if errors.Is(err, pgx.ErrNoRows) {
		return o, db.ErrNotFound
	}
	return o, err
}

// openOrder is a new resting order of one share on the YES outcome, the seq-th of market m, for a.
func openOrder(a records.Account, m records.Market, seq int64, side string, price int) records.Order {
	return records.Order{ID: db.NewID(), MarketID: m.ID, Seq: seq, AccountID: a.ID, Side: side, Outcome: "YES",
		Price: price, Quantity: 1, Status: engine.StatusOpen}
}

// TestApplyStatements prepares every combination of a batch's write statement on a migrated
// database: each must be valid SQL whose parameters Postgres types as the parts expect, and each
// returns the updated orders exactly when it updates orders.
func TestApplyStatements(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	conn := testConn(t, st)
	if applySQL[0] != "" {
		t.Errorf("an empty batch has a statement: %q", applySQL[0])
	}
	for mask := 1; mask < len(applySQL); mask++ {
		sd, err := conn.Prepare(ctx, fmt.Sprintf("apply_%d", mask), applySQL[mask])
		if err != nil {
			t.Fatalf("parts %08b: %v\n%s", mask, err, applySQL[mask])
		}
		want := 1
		for i, p := range applyParts {
			if mask&(1<<i) != 0 {
				want += p.args
			}
		}
		if len(sd.ParamOIDs) != want {
			t.Errorf("parts %08b: %d parameters, want %d", mask, len(sd.ParamOIDs), want)
		}
		columns := 0
		if mask&(1<<partOrderUpdates) != 0 {
			columns += len(strings.Split(updatedOrderColumns, ","))
		}
		if columns == 0 {
			columns = 1 // the statement returns nothing, in one column
		}
		if len(sd.Fields) != columns {
			t.Errorf("parts %08b: returns %d columns, want %d", mask, len(sd.Fields), columns)
		}
	}
	// The accounts' statement in each variant: the batch's time, the holder, the cash part's seven
	// arrays, the halts' version and the claim's token, returning each account and its last seq.
	for v, sql := range cashSQL {
		sd, err := conn.Prepare(ctx, fmt.Sprintf("cash_%d", v), sql)
		if err != nil {
			t.Fatalf("variant %d: %v\n%s", v, err, sql)
		}
		if len(sd.ParamOIDs) != 11 || len(sd.Fields) != 2 {
			t.Errorf("variant %d: %d parameters and %d columns, want 11 and 2", v, len(sd.ParamOIDs), len(sd.Fields))
		}
	}
}

// TestCommitBatch checks CommitBatch's contract: a batch whose writes fail commits nothing and
// leaves the connection outside any transaction; BeginBatch's read of an account waits for
// another transaction's lock on it only with LockAccounts; and an unlocked batch begins its own
// transaction, commits in the same round trip, and is Refused when it would overdraw an account.
func TestCommitBatch(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	alice := records.Account{ID: dbtest.Account(t, st.Pool, "alice", 1_000)}
	bob := records.Account{ID: dbtest.Account(t, st.Pool, "bob", 1_000)}
	allocateAll(t, st, alice.ID, bob.ID)
	conn := testConn(t, st)
	if _, err := conn.Exec(ctx, "set lock_timeout = '200ms'"); err != nil {
		t.Fatal(err)
	}
	available := func(id int64) int64 {
		var n int64
		if err := st.Pool.QueryRow(ctx, `select available from allocations where account_id = $1 and holder = ''`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	idle := func(when string) {
		t.Helper()
		if s := conn.PgConn().TxStatus(); s != 'I' {
			t.Errorf("connection left in transaction status %q %s", s, when)
		}
	}

	if _, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{alice.ID}, LockAccounts: true}); err != nil {
		t.Fatal(err)
	}
	b := &Batch{Now: now, Cash: []CashDelta{{Account: alice.ID, Available: -100}}}
	if _, err := CommitBatch(ctx, conn, b); err != nil {
		t.Fatal(err)
	}
	if got := available(alice.ID); got != 900 {
		t.Errorf("alice has %d available; the batch should have committed 900", got)
	}
	idle("after a batch")

	// A batch whose writes fail (alice cannot go below zero) commits nothing.
	if _, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{alice.ID}, LockAccounts: true}); err != nil {
		t.Fatal(err)
	}
	b = &Batch{Now: now, Cash: []CashDelta{{Account: alice.ID, Available: -10_000}}}
	if _, err := CommitBatch(ctx, conn, b); err == nil {
		t.Fatal("a batch overdrawing an account committed")
	}
	if got := available(alice.ID); got != 900 {
		t.Errorf("alice has %d available after a failed batch, want 900", got)
	}
	idle("after a failed batch")

	// Another transaction holds bob's account: a locked read waits for it, a plain one does not.
	other := lockWallet(t, st, bob.ID)
	if _, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{bob.ID}, LockAccounts: true}); err == nil {
		t.Error("a locked read of an account another transaction holds did not wait")
	}
	idle("after a failed beginning")
	read, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{bob.ID}})
	if err != nil || read.Cash[bob.ID] != 1_000 {
		t.Fatalf("an unlocked read of a locked account: %v, %v", read.Cash, err)
	}
	if _, err := conn.Exec(ctx, "rollback"); err != nil {
		t.Fatal(err)
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// An unlocked batch.
	b = &Batch{Now: now, Unlocked: true, Cash: []CashDelta{{Account: alice.ID, Available: -100}}}
	if _, err := CommitBatch(ctx, conn, b); err != nil {
		t.Fatalf("an unlocked batch: %v", err)
	}
	if got := available(alice.ID); got != 800 {
		t.Errorf("alice has %d available after an unlocked batch, want 800", got)
	}
	b = &Batch{Now: now, Unlocked: true, Cash: []CashDelta{{Account: alice.ID, Available: -900}}}
	if _, err := CommitBatch(ctx, conn, b); !Refused(err) {
		t.Fatalf("an unlocked batch overdrawing an account: %v, want one Refused", err)
	}
	if got := available(alice.ID); got != 800 {
		t.Errorf("alice has %d available after a refused batch, want 800", got)
	}
	idle("after a refused batch")
}

// TestAllocatedBatch checks the accounts' statement of a batch whose shard takes its allocation
// rows as written (Batch.Allocated): it writes them by an update and numbers their events as the
// statement with the insert does; a missing row fails the whole batch as AllocationMissing, with or
// without events (the check runs before the statement returns a row, also when it returns none),
// writing nothing; and the halts are checked in the same statement, with no statement of their
// own.
func TestAllocatedBatch(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	alice := dbtest.Account(t, st.Pool, "alice", 1_000)
	carol := dbtest.Account(t, st.Pool, "carol", 1_000)
	allocateAll(t, st, alice) // carol has no allocation of holder ''
	conn := testConn(t, st)
	row := func(id int64) (available, seq int64, found bool) {
		t.Helper()
		err := st.Pool.QueryRow(ctx, `select available, event_seq from allocations where account_id = $1 and holder = ''`, id).Scan(&available, &seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return available, seq, true
	}
	event := []byte(`[{"type":"accepted"}]`)

	// Alice's row exists: the update alone writes it and numbers her event.
	c, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Allocated: true,
		Cash: []CashDelta{{Account: alice, Available: -100, EventCount: 1, Events: event}}})
	if err != nil {
		t.Fatal(err)
	}
	if avail, seq, _ := row(alice); avail != 900 || seq != 1 || len(c.Accounts) != 1 || c.Accounts[0].First != 1 || c.Accounts[0].Last != 1 {
		t.Fatalf("after an allocated batch alice holds %d with feed at %d, events %+v; want 900, 1, one event numbered 1", avail, seq, c.Accounts)
	}

	// Carol's row is missing: the batch fails whole, with events or without.
	for _, n := range []int64{0, 1} {
		var events []byte
		if n > 0 {
			events = event
		}
		_, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Allocated: true,
			Cash: []CashDelta{{Account: alice, Available: -100, EventCount: n, Events: events}, {Account: carol, Available: 50, EventCount: n, Events: events}}})
		if !AllocationMissing(err) {
			t.Fatalf("an allocated batch with a missing row (%d events an account): %v, want AllocationMissing", n, err)
		}
		if avail, seq, _ := row(alice); avail != 900 || seq != 1 {
			t.Fatalf("a failed batch wrote alice's row: %d, feed at %d", avail, seq)
		}
		if _, _, found := row(carol); found {
			t.Fatal("a failed batch wrote carol's row")
		}
		if s := conn.PgConn().TxStatus(); s != 'I' {
			t.Fatalf("connection left in transaction status %q", s)
		}
	}
	// Run again without Allocated, it inserts the row.
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true,
		Cash: []CashDelta{{Account: alice, Available: -100}, {Account: carol, Available: 50, EventCount: 1, Events: event}}}); err != nil {
		t.Fatal(err)
	}
	if avail, seq, found := row(carol); !found || avail != 50 || seq != 1 {
		t.Fatalf("carol's new row: %d, feed at %d (found %v); want 50, 1", avail, seq, found)
	}

	// The halts are checked in the accounts' statement, in both of its forms.
	var version int64
	if err := st.Pool.QueryRow(ctx, `select version from halts`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	for _, allocated := range []bool{true, false} {
		stale := version + 1
		_, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Allocated: allocated, Halts: &stale,
			Cash: []CashDelta{{Account: alice, Available: -1}}})
		if !HaltsMoved(err) {
			t.Fatalf("a batch (allocated %v) decided under halts' version %d at %d: %v, want HaltsMoved", allocated, stale, version, err)
		}
		if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Allocated: allocated, Halts: &version,
			Cash: []CashDelta{{Account: alice, Available: -1}}}); err != nil {
			t.Fatalf("a batch (allocated %v) decided under the halts' version: %v", allocated, err)
		}
	}
	if avail, _, _ := row(alice); avail != 798 {
		t.Fatalf("alice holds %d, want 798", avail)
	}
	var checks int64
	if err := conn.QueryRow(ctx, `select count(*) from pg_prepared_statements where statement like 'select halt_check(%'`).Scan(&checks); err != nil {
		t.Fatal(err)
	}
	if checks != 0 {
		t.Errorf("%d statements of halt_check prepared; a batch with cash checks the halts in its accounts' statement", checks)
	}
}

// TestClientOrderIDs checks how a batch claims client order ids: one that an order has is found,
// and a batch on another connection claiming the same id waits until the first batch ends, then
// finds the order it wrote.
func TestClientOrderIDs(t *testing.T) {
	ctx := context.Background()
	st, alice, m := newTestTrader(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	conns := make([]*pgx.Conn, 2)
	for i := range conns {
		conns[i] = testConn(t, st)
	}
	key := ClientOrderKey{Account: alice.ID, ID: "quote-1"}
	claim := Begin{ClientOrderIDs: []ClientOrderKey{key, {Account: alice.ID, ID: "quote-2"}}}

	first, err := BeginBatch(ctx, conns[0], claim)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Taken) != 0 {
		t.Fatalf("fresh ids are taken: %v", first.Taken)
	}
	second := make(chan Locked, 1)
	go func() {
		l, err := BeginBatch(ctx, conns[1], claim)
		if err != nil {
			t.Error(err)
		}
		second <- l
	}()
	// The second batch waits on the first one's lock: readiness, not a sleep.
	if err := poll.Until(ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
		var waiting bool
		err := st.Pool.QueryRow(ctx, `select exists (select 1 from pg_locks where locktype = 'advisory' and not granted)`).Scan(&waiting)
		return waiting, err
	}); err != nil {
		t.Fatal(err)
	}
	id := "quote-1"
	placement := "a placement"
	b := &Batch{Now: now, NewOrders: []records.Order{{ID: db.NewID(), MarketID: m.ID, Side: "SELL", Outcome: "YES", Price: 40, Quantity: 1,
		Status: engine.StatusCancelled, Seq: 1, AccountID: alice.ID, ClientOrderID: &id, Placement: &placement}}}
	if _, err := CommitBatch(ctx, conns[0], b); err != nil {
		t.Fatal(err)
	}
	if l := <-second; !l.Taken[key] || len(l.Taken) != 1 {
		t.Errorf("after the first batch committed, the second found %v taken; want only %v", l.Taken, key)
	}
	if _, err := conns[1].Exec(ctx, "rollback"); err != nil {
		t.Fatal(err)
	}
	o, err := orderByClientID(ctx, st, alice.ID, "quote-1")
	if err != nil || o.Placement == nil || *o.Placement != placement || o.TimeInForce != "GTC" || o.SelfTrade != "CANCEL_RESTING" {
		t.Errorf("OrderByClientID: %+v, %v", o, err)
	}
	if _, err := orderByClientID(ctx, st, alice.ID, "quote-2"); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("an id no order has: %v, want db.ErrNotFound", err)
	}
}

// TestBatchGenericPlans checks that a batch's statements are planned once, not for each
// execution: Postgres otherwise plans a statement anew for its first five executions at least,
// and kept doing so for a third of the batch statements under load.
func TestBatchGenericPlans(t *testing.T) {
	ctx := context.Background()
	st, alice, m := newTestTrader(t)
	conn := testConn(t, st)
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range 8 {
		b := &Batch{Now: now, Unlocked: true,
			NewOrders: []records.Order{openOrder(alice, m, int64(i+1), "BUY", 10)},
			Cash:      []CashDelta{{Account: alice.ID, Available: -10}}}
		if _, err := CommitBatch(ctx, conn, b); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := conn.Query(ctx, `select statement, generic_plans, custom_plans from pg_prepared_statements
		where (statement like '%new_orders as (%' or statement like 'select set_config(%')
		  and statement not like '%pg_prepared_statements%'`)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var statement string
		var generic, custom int64
		if err := rows.Scan(&statement, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		seen++
		if custom != 0 || generic != 8 {
			t.Errorf("%d custom and %d generic plans in 8 batches, want 0 and 8, for\n%.80s", custom, generic, statement)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != 2 {
		t.Errorf("%d of the batch's statements are prepared, want 2 (its settings, its writes)", seen)
	}
}

// TestBatchRetryableAfterMigration checks what a shard still running meets while a newer process
// migrates the schema under it: a batch whose prepared statement returns a column whose type
// changed fails once, as Retryable, and runs again successfully, prepared anew.
func TestBatchRetryableAfterMigration(t *testing.T) {
	ctx := context.Background()
	st, alice, m := newTestTrader(t)
	conn := testConn(t, st)
	now := time.Now().UTC().Truncate(time.Microsecond)
	var orders []records.Order // one cancelled before the migration, one after
	for seq := range int64(2) {
		orders = append(orders, openOrder(alice, m, seq+1, "BUY", 10))
	}
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, NewOrders: orders}); err != nil {
		t.Fatal(err)
	}
	cancel := func(i int) error {
		o := orders[i]
		reason := "USER"
		o.Status, o.CancelReason = engine.StatusCancelled, &reason
		_, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, OrderUpdates: []records.Order{o}})
		return err
	}
	if err := cancel(0); err != nil {
		t.Fatal(err)
	}
	// The migration, as another process runs it: a returned column changes type.
	if _, err := st.Pool.Exec(ctx, `alter table orders alter column cancel_reason type text`); err != nil {
		t.Fatal(err)
	}
	err := cancel(1)
	if err == nil {
		t.Fatal("a batch prepared before the column changed type did not fail: the test changes nothing")
	}
	if !Retryable(err) {
		t.Fatalf("the batch failed with %v, not Retryable", err)
	}
	if err := cancel(1); err != nil {
		t.Fatalf("run again: %v", err)
	}
}
