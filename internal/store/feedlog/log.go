// Package feedlog owns the feeds' log in Postgres: the batches of market and account events a
// shard's batch writes (migrations 010 and 017), read back by the live feed, from a client's
// sequence number on, and pruned by age; the markets that changed and the accounts' last numbers,
// with which a front catches up; and the presence of feed connections, which trips an account's
// cancel-on-disconnect switch when its last one closes.
package feedlog

import (
	"github.com/jackc/pgx/v5/pgxpool"
)

// Log is the feeds' log, on the exchange's database.
type Log struct {
	// Pool is the connection pool every method uses (the aggregate store's).
	Pool *pgxpool.Pool
}

// New returns the log on pool.
func New(pool *pgxpool.Pool) *Log { return &Log{Pool: pool} }
