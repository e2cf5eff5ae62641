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
