package batches

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// TestHoldersBatchesDoNotWait is issue 53's demarcation at its root: one shard's batch for an
// account is held open inside its transaction, after its writes and before its commit, and
// another shard's batches for the same account — spending its cash and adding to its feed —
// commit meanwhile, without waiting for it. Each shard's batch writes only its own allocation of
// the account and its own stream of the account's feed (docs/architecture.md §11). Before
// migration 032 both batches wrote the account's row, and the second waited for the first's commit
// (here: its lock_timeout).
func TestHoldersBatchesDoNotWait(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	alice := dbtest.Account(t, st.Pool, "alice", 1_000)
	now := time.Now().UTC().Truncate(time.Microsecond)
	setup := testConn(t, st)
	for _, holder := range []string{"shard-a", "shard-b"} {
		if _, _, err := Acquire(ctx, setup, holder, []Need{{Account: alice, Cash: 400}}, 2); err != nil {
			t.Fatal(err)
		}
	}
	spend := func(holder string, cents int64) *Batch {
		return &Batch{Holder: holder, Now: now, Cash: []CashDelta{{Account: alice, Available: -cents, EventCount: 1, Events: []byte(`[{"type":"accepted"}]`)}}}
	}

	// Shard a's batch: begun, its writes done, not committed.
	held := testConn(t, st)
	if _, err := held.Exec(ctx, "begin"); err != nil {
		t.Fatal(err)
	}
	sql, args, _ := cashStatement(spend("shard-a", 100))
	if err := queryAll(ctx, held, sql, args...); err != nil {
		t.Fatal(err)
	}

	// Shard b's batches commit meanwhile; a wait would end in lock_timeout.
	other := testConn(t, st)
	if _, err := other.Exec(ctx, "set lock_timeout = '5s'"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		b := spend("shard-b", 10)
		b.Unlocked = true
		if _, err := CommitBatch(ctx, other, b); err != nil {
			t.Fatalf("shard b's batch %d while shard a's is open for the same account: %v (it waited for a's rows)", i+1, err)
		}
	}
	if _, err := held.Exec(ctx, "commit"); err != nil {
		t.Fatal(err)
	}

	var err error
	// The control: two writers of the account's own row, as every shard's batch was before
	// migration 032, do wait — this test can tell.
	if _, err := held.Exec(ctx, "begin"); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctx, `update accounts set available = available where id = $1`, alice); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "set lock_timeout = '200ms'"); err != nil {
		t.Fatal(err)
	}
	_, err = other.Exec(ctx, `update accounts set available = available where id = $1`, alice)
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("a second writer of the account's row while the first is open: %v, want it to wait (lock_timeout)", err)
	}
	if _, err := held.Exec(ctx, "rollback"); err != nil {
		t.Fatal(err)
	}

	// Both committed, each in its own allocation and its own stream of the feed.
	rows, err := st.Pool.Query(ctx, `select al.holder, al.available, al.event_seq,
		(select count(*) from account_events e where e.account_id = al.account_id and e.holder = al.holder)
		from allocations al where al.account_id = $1 order by al.holder`, alice)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Holder         string
		Available, Seq int64
		EventRows      int64
	}])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Holder != "shard-a" || got[1].Holder != "shard-b" {
		t.Fatalf("allocations %+v, want shard-a's and shard-b's", got)
	}
	if a := got[0]; a.Seq != 1 || a.EventRows != 1 {
		t.Errorf("shard-a's stream: last seq %d in %d rows, want 1 in 1", a.Seq, a.EventRows)
	}
	if b := got[1]; b.Seq != 3 || b.EventRows != 3 {
		t.Errorf("shard-b's stream: last seq %d in %d rows, want 3 in 3", b.Seq, b.EventRows)
	}
	var total int64
	if err := st.Pool.QueryRow(ctx, `select available + locked from account_balances where id = $1`, alice).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 1_000-100-3*10 {
		t.Errorf("alice has %d in all, want %d", total, 1_000-100-3*10)
	}
}

// queryAll runs a statement and reads all it returns.
func queryAll(ctx context.Context, conn *pgx.Conn, sql string, args ...any) error {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}
