package batches

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Allocations (docs/architecture.md §11, migration 032). Each shard — a holder — decides its
// batches from what it holds of each account: free cash it may lock or pay out, and under a
// maxLockedCash the room it may still lock. Its batches write only its own rows; cash moves
// between an account's wallet (accounts.available) and its holders' allocations off the order
// path, in transactions of their own: an acquire when a holder is short, a return when it holds
// more than it needs.

// everything is a Need's amount for all an account has.
const everything = 1 << 62

// Need is what a holder asks to hold of an account: at least Cash free and, under a
// maxLockedCash, Room (0 when it only wants to read what it holds).
type Need struct {
	Account int64
	Cash    int64
	Room    int64
}

// Acquire moves to holder's allocations what need asks where the accounts have it — from their
// wallets, then from other holders — in one transaction of its own, and returns every
// allocation asked for as it leaves it, with the account's limits (an account that does not exist
// is left out). Besides what it needs, a holder takes a share of what is left in the wallet, and
// of what the first other holder it takes from holds beyond the need, so that it need not come
// back soon: 1/spread (the holders of its own process) or 1/(the holders with a row of the
// account), whichever is less (migration 042). An account the holder already holds enough of is
// read, not locked.
func Acquire(ctx context.Context, conn *pgx.Conn, holder string, need []Need, spread int) (map[int64]int64, map[int64]Risk, error) {
	need = slices.Clone(need)
	slices.SortFunc(need, func(a, b Need) int { return cmp.Compare(a.Account, b.Account) }) // the order wallets are locked in
	accounts, cash, room := make([]int64, len(need)), make([]int64, len(need)), make([]int64, len(need))
	for i, n := range need {
		accounts[i], cash[i], room[i] = n.Account, max(n.Cash, 0), max(n.Room, 0)
	}
	rows, err := conn.Query(ctx, `select * from acquire_cash($1, $2, $3, $4, $5)`, holder, accounts, cash, room, max(spread, 1))
	if err != nil {
		return nil, nil, fmt.Errorf("while acquiring cash for %s: %w", holder, err)
	}
	defer rows.Close()
	avail, risk := make(map[int64]int64, len(need)), make(map[int64]Risk, len(need))
	if err := scanAllocations(rows, avail, risk); err != nil {
		return nil, nil, fmt.Errorf("while acquiring cash for %s: %w", holder, err)
	}
	return avail, risk, nil
}

// AcquireCash is Acquire on a connection of the pool: for a shard's views of accounts it meets
// for the first time while a batch of its own commits on its own connection
// (internal/shard/views.go, learnAccounts).
func (s *Writer) AcquireCash(ctx context.Context, holder string, need []Need, spread int) (map[int64]int64, map[int64]Risk, error) {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("while acquiring cash for %s: %w", holder, err)
	}
	defer conn.Release()
	return Acquire(ctx, conn.Conn(), holder, need, spread)
}

// Return gives back to the wallets what holder holds of accounts (all of them when nil): its
// free cash and its room. It reports the cash returned.
func Return(ctx context.Context, conn *pgx.Conn, holder string, accounts []int64) (int64, error) {
	var total int64
	if err := conn.QueryRow(ctx, `select return_cash($1, $2)`, holder, accounts).Scan(&total); err != nil {
		return 0, fmt.Errorf("while returning the cash %s holds: %w", holder, err)
	}
	return total, nil
}

// ReturnIdle gives back to the wallets what holder holds of accounts, as Return does, but only
// for the accounts whose wallets no other transaction holds now (an acquire of another holder, a
// change of the limits), without waiting for them; it reports the others that hold something,
// which it left. It is the return sweep's (internal/shard/allocations.go): on the shard's own
// connection, where a wait would hold the shard's batches too (return_idle, migration 044).
func ReturnIdle(ctx context.Context, conn *pgx.Conn, holder string, accounts []int64) (busy []int64, err error) {
	rows, err := conn.Query(ctx, `select * from return_idle($1, $2)`, holder, accounts)
	if err != nil {
		return nil, fmt.Errorf("while returning the idle cash %s holds: %w", holder, err)
	}
	busy, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("while returning the idle cash %s holds: %w", holder, err)
	}
	return busy, nil
}
