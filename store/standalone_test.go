package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/poll"
)

// TestClaimStandalone checks that a database has one standalone exchange at a time: a second
// claim waits out its wait and is refused, naming the holder's session, and a claim given up lets
// the next one in.
func TestClaimStandalone(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	first, err := st.ClaimStandalone(ctx, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var pid int32
	if err := first.conn.QueryRow(ctx, "select pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	second, err := st.ClaimStandalone(ctx, 50*time.Millisecond, time.Second)
	if !errors.Is(err, ErrClaimed) {
		t.Fatalf("a second claim: %v, %v; want ErrClaimed", second, err)
	}
	for _, want := range []string{"pid " + strconv.Itoa(int(pid)), "--database-url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := st.ClaimStandalone(ctx, time.Second, time.Second)
	if err != nil {
		t.Fatalf("a claim after the first was given up: %v", err)
	}
	if err := third.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClaimWaitsForStandaloneBatches checks the order a restarted pmx dev relies on: a claim
// returns only after every standalone batch under way has ended, so that what a killed process's
// last batch commits is there when the new process loads its books; and a batch that begins while
// the claim drains waits for it. Both ways a batch begins are covered: BeginBatch (locked) and
// CommitBatch (unlocked).
func TestClaimWaitsForStandaloneBatches(t *testing.T) {
	ctx := context.Background()
	st, alice, _ := newTestTrader(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	waiting := func(ctx context.Context) (bool, error) { // an advisory lock someone waits for
		var n int
		err := st.Pool.QueryRow(ctx, `select count(*) from pg_locks where locktype = 'advisory' and not granted`).Scan(&n)
		return n > 0, err
	}
	available := func() int64 {
		var n int64
		if err := st.Pool.QueryRow(ctx, `select available from accounts where id = $1`, alice.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A locked batch under way: the claim waits for its commit, and sees what it wrote.
	conn := testConn(t, st)
	if _, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{alice.ID}, LockAccounts: true, Standalone: true}); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	var claim *Claim
	go func() {
		var err error
		claim, err = st.ClaimStandalone(ctx, time.Second, time.Minute)
		claimed <- err
	}()
	if err := poll.Until(ctx, 10*time.Second, waiting); err != nil {
		t.Fatalf("the claim never waited for the batch under way: %v", err)
	}
	select {
	case err := <-claimed:
		t.Fatalf("the claim returned (%v) while a standalone batch was under way", err)
	default:
	}
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Cash: []CashDelta{{Account: alice.ID, Available: -100, Locked: 100}}}); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Fatal(err)
	}
	if got := available(); got != 900 {
		t.Errorf("after the claim alice has %d available, want the batch's 900", got)
	}
	if err := claim.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A claim draining (a session holding the batches' mark stands in for the batches it waits
	// for): an unlocked batch waits for it, then commits.
	other := testConn(t, st)
	if _, err := other.Exec(ctx, "select pg_advisory_lock($1, $2)", lockSpace, batchKey); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() {
		_, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Standalone: true,
			Cash: []CashDelta{{Account: alice.ID, Available: -100, Locked: 100}}})
		committed <- err
	}()
	if err := poll.Until(ctx, 10*time.Second, waiting); err != nil {
		t.Fatalf("an unlocked standalone batch did not wait for the claim: %v", err)
	}
	if _, err := other.Exec(ctx, "select pg_advisory_unlock($1, $2)", lockSpace, batchKey); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if got := available(); got != 800 {
		t.Errorf("alice has %d available, want 800 after the second batch", got)
	}

	// A batch of a named shard takes no mark: it commits while the mark is held.
	if _, err := other.Exec(ctx, "select pg_advisory_lock($1, $2)", lockSpace, batchKey); err != nil {
		t.Fatal(err)
	}
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true,
		Cash: []CashDelta{{Account: alice.ID, Available: -100, Locked: 100}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "select pg_advisory_unlock($1, $2)", lockSpace, batchKey); err != nil {
		t.Fatal(err)
	}
}

// TestClaimDrainBound checks that a claim that cannot drain (a batch under way longer than its
// drain) fails with an error that says so, and leaves the claim free for the next process.
func TestClaimDrainBound(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	conn := testConn(t, st)
	if _, err := BeginBatch(ctx, conn, Begin{Standalone: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimStandalone(ctx, time.Second, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("a claim with a batch under way past its drain: %v; want an error saying a batch is still running", err)
	}
	rollbackBatch(ctx, conn)
	claim, err := st.ClaimStandalone(ctx, time.Second, time.Second)
	if err != nil {
		t.Fatalf("a claim after the batch ended: %v", err)
	}
	if err := claim.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
