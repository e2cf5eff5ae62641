package batches

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BatchConn is one connection that a shard's batches run on, one after the other. A batch begins
// its transaction, reading (and with Begin.LockAccounts locking) what it reserves from
// (BeginBatch), then commits its rows (CommitBatch); a batch that read nothing (Batch.Unlocked)
// only commits. An error from either means the batch did not commit (or, ErrCommitUnknown, may
// have) and its transaction is over; Refused, Fenced and Retryable sort such errors. It is an
// interface so that the shard can run on another implementation of the same contract: its
// scenario tests run on one in memory (internal/shard/scenario_*_test.go).
type BatchConn interface {
	BeginBatch(ctx context.Context, b Begin) (Locked, error)
	CommitBatch(ctx context.Context, b *Batch) (Committed, error)
	// Acquire moves free cash (and room) to holder's allocations, in a transaction of its own,
	// so that it holds what Need asks of each account where the account has it (acquire_cash,
	// migration 032), and reads them as BeginBatch does: the cash and risk returned are the
	// allocations as it leaves them.
	Acquire(ctx context.Context, holder string, need []Need, spread int) (map[int64]int64, map[int64]Risk, error)
	// Return gives back to the wallets what holder holds of accounts (every account when nil),
	// in a transaction of its own, and reports how much cash it gave.
	Return(ctx context.Context, holder string, accounts []int64) (int64, error)
	// ReturnIdle is Return for accounts the holder no longer trades, without waiting for a wallet
	// another transaction holds: it leaves those accounts and reports the ones it left that hold
	// something.
	ReturnIdle(ctx context.Context, holder string, accounts []int64) (busy []int64, err error)
	// Release gives the connection back; a broken one is replaced.
	Release()
}

// pooledBatchConn is a connection of the pool held for batches: each on the same connection,
// which keeps its prepared statements.
type pooledBatchConn struct{ conn *pgxpool.Conn }

// BatchConn takes a connection of the pool for batches, until Release.
func (s *Writer) BatchConn(ctx context.Context) (BatchConn, error) {
	c, err := s.Pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return pooledBatchConn{conn: c}, nil
}

func (c pooledBatchConn) BeginBatch(ctx context.Context, b Begin) (Locked, error) {
	return BeginBatch(ctx, c.conn.Conn(), b)
}

func (c pooledBatchConn) CommitBatch(ctx context.Context, b *Batch) (Committed, error) {
	return CommitBatch(ctx, c.conn.Conn(), b)
}

func (c pooledBatchConn) Release() { c.conn.Release() }

func (c pooledBatchConn) Acquire(ctx context.Context, holder string, need []Need, spread int) (map[int64]int64, map[int64]Risk, error) {
	return Acquire(ctx, c.conn.Conn(), holder, need, spread)
}

func (c pooledBatchConn) Return(ctx context.Context, holder string, accounts []int64) (int64, error) {
	return Return(ctx, c.conn.Conn(), holder, accounts)
}

func (c pooledBatchConn) ReturnIdle(ctx context.Context, holder string, accounts []int64) ([]int64, error) {
	return ReturnIdle(ctx, c.conn.Conn(), holder, accounts)
}
