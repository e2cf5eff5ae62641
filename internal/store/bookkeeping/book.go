// Package bookkeeping owns the operator's books in Postgres: which shard processes are registered
// and live (their heartbeats, incarnations and draining), which shards each ShardPool is to run
// (what a stopping shard may wait for), which shard owns each market under which epoch, the moves
// and hand-overs of markets between shards, the shards' load reports, and the health the
// operator's metrics report. A shard reads its own registration and markets here too.
package bookkeeping

import "github.com/jackc/pgx/v5/pgxpool"

// Book is the operator's books, on the exchange's database.
type Book struct {
	// Pool is the connection pool every method uses (the aggregate store's).
	Pool *pgxpool.Pool
}

// New returns the books on pool.
func New(pool *pgxpool.Pool) *Book { return &Book{Pool: pool} }
