package store

import (
	"context"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/records"
)

// TestAllocationsGuard holds the acquire (migration 042) and migration 032's guards to their rules
// (docs/architecture.md §11): an acquire takes cash from the wallet, then from other holders, with
// a share of what is left beyond the need (1/spread, or 1/the account's holders when they are
// more); under a max_locked_cash it gives room only within what the limit leaves, taking from
// other holders before refusing; a change of the limits takes every holder's room back and makes a write decided
// by the older version fail (Refused), as does a write that would take an allocation below zero;
// a return gives everything back to the wallet.
func TestAllocationsGuard(t *testing.T) {
	ctx := context.Background()
	st, a, conn := accountToAcquire(t, "guarded")
	acquire := func(holder string, cash, room int64, spread int) (int64, Risk) {
		t.Helper()
		c, r, err := conn.Acquire(ctx, holder, []Need{{Account: a.ID, Cash: cash, Room: room}}, spread)
		if err != nil {
			t.Fatalf("%s acquiring %d cash, %d room: %v", holder, cash, room, err)
		}
		return c[a.ID], r[a.ID]
	}
	wallet := func() int64 {
		t.Helper()
		var w int64
		if err := st.Pool.QueryRow(ctx, `select available from accounts where id = $1`, a.ID).Scan(&w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	total := func() int64 {
		t.Helper()
		got, err := st.Account(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Available + got.Locked
	}

	// Cash: what is needed and half of the rest with two holders; then the other holder's.
	if c, r := acquire("a", 1_000, 0, 2); c != 1_000+4_500 || r.Room != 0 || r.MaxLockedCash != NoLimit || wallet() != 4_500 {
		t.Fatalf("a holds %d (room %d, limit %d), the wallet %d; want 5500, 0, none, 4500", c, r.Room, r.MaxLockedCash, wallet())
	}
	if c, _ := acquire("b", 6_000, 0, 2); c != 8_000 || wallet() != 0 {
		t.Fatalf("b holds %d, the wallet %d; want 8000 (4500 of the wallet, of a's the 1500 more it needs and half of a's 4000 left), 0", c, wallet())
	}
	if c, _ := acquire("a", 0, 0, 2); c != 2_000 {
		t.Fatalf("a holds %d after b took from it, want 2000", c)
	}
	if c, _ := acquire("c", 20_000, 0, 2); c != 10_000 || total() != 10_000 {
		t.Fatalf("c, asking for more than the account has, holds %d of a total %d; want everything, 10000", c, total())
	}
	if _, err := st.Pool.Exec(ctx, `update allocations set available = available - 1 where account_id = $1 and holder = 'a'`, a.ID); !Refused(err) {
		t.Fatalf("spending what a no longer holds: %v, want it refused", err)
	}

	// Room under a limit: what the limit leaves, then what other holders have.
	limit := int64(100)
	if _, err := st.SetRiskLimits(ctx, a.ID, nil, &limit); err != nil {
		t.Fatal(err)
	}
	if _, r := acquire("a", 0, 60, 1); r.Room != 73 || r.MaxLockedCash != 100 {
		t.Fatalf("a's room %d under a limit %d, want 73 (60 and a third of the 40 left: a, b and c hold the account)", r.Room, r.MaxLockedCash)
	}
	if _, r := acquire("b", 0, 30, 1); r.Room != 53 {
		t.Fatalf("b's room %d, want 53 (the 27 a left, then 3 of a's and a third of the 70 a has beyond them)", r.Room)
	}
	if _, r := acquire("b", 0, 200, 1); r.Room != 100 {
		t.Fatalf("b asking for more room than the limit: %d, want all of it, 100", r.Room)
	}
	if _, err := st.Pool.Exec(ctx, `update allocations set room = room - 101 where account_id = $1 and holder = 'b'`, a.ID); !Refused(err) {
		t.Fatalf("locking past b's room: %v, want it refused", err)
	}

	// A change of the limits takes the room back; a write decided by the old version fails.
	var version int64
	if err := st.Pool.QueryRow(ctx, `select risk_version from allocations where account_id = $1 and holder = 'b'`, a.ID).Scan(&version); err != nil {
		t.Fatal(err)
	}
	limit = 40
	if _, err := st.SetRiskLimits(ctx, a.ID, nil, &limit); err != nil {
		t.Fatal(err)
	}
	var room int64
	if err := st.Pool.QueryRow(ctx, `select sum(room) from allocations where account_id = $1`, a.ID).Scan(&room); err != nil || room != 0 {
		t.Fatalf("room left after the limit changed: %d, %v; want 0", room, err)
	}
	_, err := st.Pool.Exec(ctx, `update allocations set risk_checked = $2 where account_id = $1 and holder = 'b'`, a.ID, version)
	if !Refused(err) {
		t.Fatalf("a write decided by version %d, the current being %d: %v, want it refused", version, version+1, err)
	}
	if _, r := acquire("b", 0, 100, 1); r.Room != 40 || r.Version != version+1 {
		t.Fatalf("b's room %d (version %d) under the lowered limit, want 40 (version %d)", r.Room, r.Version, version+1)
	}

	// Returns give everything back.
	for _, h := range []string{"a", "b", "c"} {
		if _, err := conn.Return(ctx, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	if wallet() != 10_000 || total() != 10_000 {
		t.Fatalf("after every holder returned: wallet %d, total %d; want 10000 both", wallet(), total())
	}
	if err := st.Pool.QueryRow(ctx, `select sum(room) from allocations where account_id = $1`, a.ID).Scan(&room); err != nil || room != 0 {
		t.Fatalf("room left after the returns: %d, %v", room, err)
	}
}

// TestAcquireSharesBetweenHolders: two shard processes of one matching loop each (spread 1, pmx
// shard --shards 1) spend one account's cash by turns, each acquiring before it spends. An acquire
// shares what it takes from another holder (migration 042), so cash moves at each one's first
// meeting with the account and then not again until a half runs out: twice in 40 turns. Taking
// only the need from the other holder moved it on every turn of the second shard (21 times).
func TestAcquireSharesBetweenHolders(t *testing.T) {
	ctx := context.Background()
	st, a, conn := accountToAcquire(t, "shared")
	moves := 0
	for turn := range 40 {
		holder := []string{"a", "b"}[turn%2]
		var before int64
		if err := st.Pool.QueryRow(ctx, `select coalesce((select available from allocations where account_id = $1 and holder = $2), 0)`,
			a.ID, holder).Scan(&before); err != nil {
			t.Fatal(err)
		}
		c, _, err := conn.Acquire(ctx, holder, []Need{{Account: a.ID, Cash: 200}}, 1)
		if err != nil {
			t.Fatalf("turn %d: %s acquiring 200: %v", turn, holder, err)
		}
		if c[a.ID] < 200 {
			t.Fatalf("turn %d: %s holds %d after acquiring 200 of an account with %d spent of 10000", turn, holder, c[a.ID], turn*200)
		}
		if c[a.ID] != before {
			moves++
		}
		// Spend it as a batch would: lock 200 into an order (here, out of the ledger).
		if _, err := st.Pool.Exec(ctx, `update allocations set available = available - 200 where account_id = $1 and holder = $2`, a.ID, holder); err != nil {
			t.Fatal(err)
		}
	}
	if moves != 2 {
		t.Errorf("%d of 40 acquires moved cash to their holder, want 2 (each holder's first)", moves)
	}
}

// accountToAcquire opens a store on a new database with one account of 10,000 in its wallet, and
// a batch connection to acquire on, released when the test ends.
func accountToAcquire(t *testing.T, name string) (*Store, records.Account, BatchConn) {
	t.Helper()
	ctx := context.Background()
	st := newTestStore(t)
	a, err := st.CreateAccount(ctx, name, 10_000, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := st.BatchConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return st, a, conn
}
