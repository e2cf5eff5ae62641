// Package batches owns what a shard's batch reads and writes in Postgres: BeginBatch and
// CommitBatch, which lock, check and write in one transaction the orders, trades, positions, cash,
// settlements and feed events a batch decided, fenced by the markets' epochs or the standalone
// claim (Claim); the views a shard reserves from (AccountViews, Holdings); order groups, whose
// fills a batch counts; conversions, which a batch writes; and the dead-man switch, whose tripped
// orders a shard cancels.
package batches

import "github.com/jackc/pgx/v5/pgxpool"

// Writer is the batch writer, on the exchange's database.
type Writer struct {
	// Pool is the connection pool every method uses (the aggregate store's).
	Pool *pgxpool.Pool
}

// New returns the batch writer on pool.
func New(pool *pgxpool.Pool) *Writer { return &Writer{Pool: pool} }
