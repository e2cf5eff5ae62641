package batches

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/poll"
)

// TestClaimStandalone checks that a database has one standalone exchange at a time: a second
// claim waits out its wait and is refused, naming the holder's session, and a claim given up lets
// the next one in.
func TestClaimStandalone(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	first, err := st.ClaimStandalone(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var pid int32
	if err := first.conn.QueryRow(ctx, "select pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	second, err := st.ClaimStandalone(ctx, 50*time.Millisecond)
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
	third, err := st.ClaimStandalone(ctx, time.Second)
	if err != nil {
		t.Fatalf("a claim after the first was given up: %v", err)
	}
	if err := third.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// fencedClaim claims st's database and fences it, as pmx dev does before loading its books.
func fencedClaim(t *testing.T, st *Writer) *Claim {
	t.Helper()
	ctx := context.Background()
	claim, err := st.ClaimStandalone(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := claim.Fence(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	return claim
}

// advisoryWaiters counts the sessions waiting for an advisory lock of st's database.
func advisoryWaiters(ctx context.Context, st *Writer) (int, error) {
	var n int
	err := st.Pool.QueryRow(ctx, `select count(*) from pg_locks where locktype = 'advisory' and not granted
		and database = (select oid from pg_database where datname = current_database())`).Scan(&n)
	return n, err
}

// waitForWaiters waits until n sessions wait for an advisory lock of st's database.
func waitForWaiters(t *testing.T, st *Writer, n int, what string) {
	t.Helper()
	if err := poll.Until(context.Background(), 10*time.Second, func(ctx context.Context) (bool, error) {
		got, err := advisoryWaiters(ctx, st)
		return got >= n, err
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// fenceBehind claims st's database and starts its Fence, which must wait for a batch under way
// (what says so if it does not): it returns the claim, given up when t ends, and the Fence's result
// to come.
func fenceBehind(t *testing.T, st *Writer, what string) (*Claim, <-chan error) {
	t.Helper()
	ctx := context.Background()
	claim, err := st.ClaimStandalone(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { claim.Close(ctx) })
	fenced := make(chan error, 1)
	go func() { fenced <- claim.Fence(ctx, time.Minute) }()
	waitForWaiters(t, st, 1, what)
	return claim, fenced
}

// available is an account's available cash, as committed.
func available(t *testing.T, st *Writer, account int64) int64 {
	t.Helper()
	var n int64
	if err := st.Pool.QueryRow(context.Background(), `select available from allocations where account_id = $1 and holder = ''`, account).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestClaimWaitsForStandaloneBatches checks the order a restarted pmx dev relies on: Fence returns
// only after every standalone batch under way has ended, so that what a killed process's last
// batch commits is there when the new process loads its books; and a batch that begins while the
// claim fences waits for it. Both ways a batch begins are covered: BeginBatch (locked) and
// CommitBatch (unlocked).
func TestClaimWaitsForStandaloneBatches(t *testing.T) {
	ctx := context.Background()
	st, alice, _ := newTestTrader(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	spend := []CashDelta{{Account: alice.ID, Available: -100}}

	// A killed process's locked batch under way: the next claim's Fence waits for its commit, and
	// sees what it wrote.
	killed := fencedClaim(t, st)
	token := killed.Token()
	if err := killed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	conn := testConn(t, st)
	if _, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{alice.ID}, LockAccounts: true, Claim: token}); err != nil {
		t.Fatal(err)
	}
	claim, fenced := fenceBehind(t, st, "the claim never waited for the batch under way")
	select {
	case err := <-fenced:
		t.Fatalf("Fence returned (%v) while a standalone batch was under way", err)
	default:
	}
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Cash: spend}); err != nil {
		t.Fatal(err)
	}
	if err := <-fenced; err != nil {
		t.Fatal(err)
	}
	if got := available(t, st, alice.ID); got != 900 {
		t.Errorf("after the claim alice has %d available, want the batch's 900", got)
	}
	if claim.Token() != token+1 {
		t.Errorf("the new claim's token is %d, want one past the killed one's %d", claim.Token(), token)
	}

	// A claim fencing (a session holding the batches' mark stands in for it): an unlocked batch
	// waits for it, then commits.
	other := testConn(t, st)
	if _, err := other.Exec(ctx, "select pg_advisory_lock($1, $2)", lockSpace, batchKey); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() {
		_, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Claim: claim.Token(), Cash: spend})
		committed <- err
	}()
	waitForWaiters(t, st, 1, "an unlocked standalone batch did not wait for the claim")
	if _, err := other.Exec(ctx, "select pg_advisory_unlock($1, $2)", lockSpace, batchKey); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if got := available(t, st, alice.ID); got != 800 {
		t.Errorf("alice has %d available, want 800 after the second batch", got)
	}

	// A batch of a named shard takes no mark: it commits while the mark is held.
	if _, err := other.Exec(ctx, "select pg_advisory_lock($1, $2)", lockSpace, batchKey); err != nil {
		t.Fatal(err)
	}
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Cash: spend}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "select pg_advisory_unlock($1, $2)", lockSpace, batchKey); err != nil {
		t.Fatal(err)
	}
}

// TestClaimFencesEarlierBatches checks the token: once a claim has fenced the database, a batch
// carrying an earlier claim's token fails as ClaimLost and writes nothing, locked or unlocked;
// and so does one that was waiting for the mark while the new claim raised the token, which
// therefore reads it as committed after the wait.
func TestClaimFencesEarlierBatches(t *testing.T) {
	ctx := context.Background()
	st, alice, _ := newTestTrader(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	spend := []CashDelta{{Account: alice.ID, Available: -100}}
	conn := testConn(t, st)

	first := fencedClaim(t, st)
	old := first.Token()
	if err := first.Close(ctx); err != nil { // its session ends; its process does not know
		t.Fatal(err)
	}
	second := fencedClaim(t, st)
	defer second.Close(ctx)
	if _, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{alice.ID}, Claim: old}); !ClaimLost(err) {
		t.Errorf("a locked batch with the earlier claim's token began: %v; want ClaimLost", err)
	}
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Claim: old, Cash: spend}); !ClaimLost(err) {
		t.Errorf("an unlocked batch with the earlier claim's token: %v; want ClaimLost", err)
	}
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Claim: old, Markets: []MarketUpdate{{ID: uuid.New()}}}); !ClaimLost(err) {
		t.Errorf("an unlocked batch with the earlier claim's token and no cash: %v; want ClaimLost", err)
	}
	if got := available(t, st, alice.ID); got != 1_000 {
		t.Errorf("alice has %d available after two fenced batches, want 1000: one of them wrote", got)
	}
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Claim: second.Token(), Cash: spend}); err != nil {
		t.Fatalf("a batch with the claim's own token: %v", err)
	}

	// A batch of second's under way holds the mark; a third claim's Fence waits for it, and a
	// later batch of second's waits behind the Fence. When the first commits, the Fence raises
	// the token, and the waiting batch must see the new one.
	if _, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{alice.ID}, Claim: second.Token()}); err != nil {
		t.Fatal(err)
	}
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, fenced := fenceBehind(t, st, "the third claim's Fence did not wait for the batch under way")
	late := testConn(t, st)
	lateDone := make(chan error, 1)
	go func() {
		_, err := CommitBatch(ctx, late, &Batch{Now: now, Unlocked: true, Claim: second.Token(), Cash: spend})
		lateDone <- err
	}()
	waitForWaiters(t, st, 2, "the late batch did not wait behind the Fence")
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Cash: spend}); err != nil {
		t.Fatal(err)
	}
	if err := <-fenced; err != nil {
		t.Fatal(err)
	}
	if err := <-lateDone; !ClaimLost(err) {
		t.Errorf("a batch that waited while the token was raised: %v; want ClaimLost", err)
	}
	if got := available(t, st, alice.ID); got != 800 {
		t.Errorf("alice has %d available, want 800: the two batches of the claim while it held", got)
	}
}

// TestClaimDrainBound checks that a Fence that cannot drain (a batch under way longer than its
// drain) fails with an error that says so, and that the claim given up is free for the next
// process.
func TestClaimDrainBound(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	killed := fencedClaim(t, st)
	token := killed.Token()
	if err := killed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	conn := testConn(t, st)
	if _, err := BeginBatch(ctx, conn, Begin{Claim: token}); err != nil {
		t.Fatal(err)
	}
	claim, err := st.ClaimStandalone(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := claim.Fence(ctx, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("a Fence with a batch under way past its drain: %v; want an error saying a batch is still running", err)
	}
	if err := claim.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rollbackBatch(ctx, conn)
	fencedClaim(t, st).Close(ctx)
}

// claimHolder is the Postgres session that holds the standalone claim of st's database, 0 if none.
func claimHolder(ctx context.Context, st *Writer) (int32, error) {
	var pid int32
	err := st.Pool.QueryRow(ctx, `select coalesce((select pid from pg_locks where locktype = 'advisory' and granted
		and database = (select oid from pg_database where datname = current_database())
		and classid = $1::bigint::oid and objid = $2::bigint::oid and objsubid = 2), 0)`,
		int64(uint32(lockSpace)), int64(uint32(claimKey))).Scan(&pid)
	return pid, err
}

// endClaimSession ends the session that holds the claim, as a Postgres restart would, and returns
// its pid.
func endClaimSession(t *testing.T, st *Writer) int32 {
	t.Helper()
	ctx := context.Background()
	pid, err := claimHolder(ctx, st)
	if err != nil || pid == 0 {
		t.Fatalf("no session holds the claim (%v)", err)
	}
	if _, err := st.Pool.Exec(ctx, "select pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// takeOver claims st's database from another process: a claim waits for it, and the holder's
// session is then ended under it, so that the waiting claim gets it before the holder can claim it
// again.
func takeOver(t *testing.T, st *Writer) *Claim {
	t.Helper()
	var c *Claim
	claimed := make(chan error, 1)
	go func() {
		var err error
		c, err = st.ClaimStandalone(context.Background(), 10*time.Second)
		claimed <- err
	}()
	waitForWaiters(t, st, 1, "the other claim did not wait")
	endClaimSession(t, st)
	if err := <-claimed; err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClaimKeep checks what a claim does when its session ends under it: it claims the database
// again, and its batches go on; or, when another process claimed the database meanwhile, Keep
// returns ErrClaimed, whether that process still holds the claim or has raised the token and let
// it go.
func TestClaimKeep(t *testing.T) {
	ctx := context.Background()
	st, alice, _ := newTestTrader(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Now().UTC().Truncate(time.Microsecond)
	spend := []CashDelta{{Account: alice.ID, Available: -100}}
	conn := testConn(t, st)
	// keep runs c.Keep until stop, or until Keep returns by itself: ended waits for that.
	keep := func(c *Claim, wait time.Duration) (stop, ended func() error) {
		keepCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Keep(keepCtx, log, wait, 10*time.Millisecond) }()
		t.Cleanup(cancel)
		stop = func() error { cancel(); return <-done }
		ended = func() error {
			select {
			case err := <-done:
				return err
			case <-time.After(time.Minute):
				t.Fatal("Keep did not return within a minute")
				return nil
			}
		}
		return stop, ended
	}

	// Taken again: a new session holds the claim, the token is unchanged, and batches commit.
	a := fencedClaim(t, st)
	defer a.Close(ctx)
	stopA, _ := keep(a, time.Second)
	ended := endClaimSession(t, st)
	if err := poll.Until(ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
		pid, err := claimHolder(ctx, st)
		return pid != 0 && pid != ended, err
	}); err != nil {
		t.Fatalf("the claim was not taken again after its session ended: %v", err)
	}
	if _, err := CommitBatch(ctx, conn, &Batch{Now: now, Unlocked: true, Claim: a.Token(), Cash: spend}); err != nil {
		t.Fatalf("a batch after the claim was taken again: %v", err)
	}
	if _, err := st.ClaimStandalone(ctx, 50*time.Millisecond); !errors.Is(err, ErrClaimed) {
		t.Fatalf("another claim while the first was taken again: %v; want ErrClaimed", err)
	}
	if err := stopA(); err != nil {
		t.Fatalf("Keep, stopped: %v", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Taken by another, which keeps it: Keep gives up after its wait.
	b := fencedClaim(t, st)
	defer b.Close(ctx)
	_, endedB := keep(b, 100*time.Millisecond)
	c := takeOver(t, st)
	defer c.Close(ctx)
	if err := c.Fence(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := endedB(); !errors.Is(err, ErrClaimed) {
		t.Fatalf("Keep, after another process took the claim: %v; want ErrClaimed", err)
	}

	// Taken by another, which raised the token and let it go before Keep claimed it again: Keep
	// finds the token changed.
	_, endedC := keep(c, 10*time.Second)
	d := takeOver(t, st)
	if err := d.Fence(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	waitForWaiters(t, st, 1, "Keep did not wait for the claim")
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	err := endedC()
	if !errors.Is(err, ErrClaimed) || !strings.Contains(err.Error(), "fencing token") {
		t.Fatalf("Keep, after another process raised the token: %v; want ErrClaimed naming the token", err)
	}
}
