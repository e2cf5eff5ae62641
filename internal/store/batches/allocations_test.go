package batches

import (
	"context"
	"slices"
	"testing"

	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// TestReturnIdle checks the return sweep's statement: it gives back what the holder holds of the
// accounts whose wallets no other transaction holds, leaves without waiting the one whose wallet
// is held, and reports it (and not an account the holder holds nothing of); once the wallet is
// free, it gives that one back too.
func TestReturnIdle(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	alice := dbtest.Account(t, st.Pool, "alice", 1_000)
	bob := dbtest.Account(t, st.Pool, "bob", 1_000)
	carol := dbtest.Account(t, st.Pool, "carol", 1_000)
	conn := testConn(t, st)
	if _, _, err := Acquire(ctx, conn, "shard-a", []Need{{Account: alice, Cash: 1_000}, {Account: bob, Cash: 1_000}}, 1); err != nil {
		t.Fatal(err)
	}
	// A wait would end here, in an error, rather than in the test's own timeout.
	if _, err := conn.Exec(ctx, "set lock_timeout = '30s'"); err != nil {
		t.Fatal(err)
	}
	wallet := func(account int64) int64 {
		t.Helper()
		var w int64
		if err := st.Pool.QueryRow(ctx, `select available from accounts where id = $1`, account).Scan(&w); err != nil {
			t.Fatal(err)
		}
		return w
	}

	other := lockWallet(t, st, alice)
	busy, err := ReturnIdle(ctx, conn, "shard-a", []int64{alice, bob, carol})
	if err != nil {
		t.Fatalf("with alice's wallet held: %v", err)
	}
	if !slices.Equal(busy, []int64{alice}) {
		t.Errorf("left %v, want only alice (%d): bob's wallet was free, and carol's cash is not held", busy, alice)
	}
	if w := wallet(bob); w != 1_000 {
		t.Errorf("bob's wallet holds %d, want 1000 returned", w)
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if w := wallet(alice); w != 0 {
		t.Errorf("alice's wallet holds %d after a return that left her, want 0", w)
	}

	busy, err = ReturnIdle(ctx, conn, "shard-a", []int64{alice})
	if err != nil || len(busy) != 0 {
		t.Fatalf("with the wallet free: left %v, %v; want none", busy, err)
	}
	if w := wallet(alice); w != 1_000 {
		t.Errorf("alice's wallet holds %d, want 1000 returned", w)
	}
	var allocated int64
	if err := st.Pool.QueryRow(ctx, `select coalesce(sum(available + room), 0) from allocations where holder = 'shard-a'`).Scan(&allocated); err != nil {
		t.Fatal(err)
	}
	if allocated != 0 {
		t.Errorf("shard-a still holds %d", allocated)
	}
}
