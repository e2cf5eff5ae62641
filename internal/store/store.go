// Package store owns pmx's Postgres schema and every SQL statement the exchange runs: migrations,
// the reads the API serves, and the writes a shard commits for a batch of orders. It is split by
// concern; each concern's sub-package has a type that Store embeds, so that its methods are Store's:
//
//   - internal/store/db: the shared plumbing: opening the pool, the migrations and migrating, the
//     errors, new ids, cursors, scan helpers, and the rows two concerns share;
//   - internal/store/accounts: accounts and keys: API keys, ws tokens, sessions, sign-ins and
//     sign-ups, signed requests' replays, rate limits, risk limits, key revocations;
//   - internal/store/feedlog: the feeds' log: market and account event batches, presence;
//   - internal/store/bookkeeping: the operator's books: shards, the shards each ShardPool
//     expects, market ownership, moves, load, health;
//   - internal/store/markets: markets and events, and the orders, trades, positions, fills,
//     candles and settlements the API reads;
//   - internal/store/batches: the batch writer: BeginBatch and CommitBatch, which write what a
//     shard's batch decided, with the views it reserves from, order groups, conversions, the
//     dead-man switch and the standalone claim.
//
// This package is the aggregate: Store and Open, Migrate, the pool's metrics, and the names its
// callers use of the concerns' types and checks (store.Batch, store.ErrNotFound, store.Refused...).
package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pmx-dev/pmx/internal/store/accounts"
	"github.com/pmx-dev/pmx/internal/store/batches"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
	"github.com/pmx-dev/pmx/internal/store/db"
	"github.com/pmx-dev/pmx/internal/store/feedlog"
	"github.com/pmx-dev/pmx/internal/store/markets"
)

// Errors the store translates from Postgres into domain terms (internal/store/db's, named here
// for the store's callers).
var (
	ErrNotFound = db.ErrNotFound
	ErrConflict = db.ErrConflict
)

// Cursor is a position in a newest-first listing (orders, markets): the last row of a page.
type Cursor = db.Cursor

// NewID returns a new row id for the hot tables (db.NewID).
func NewID() uuid.UUID { return db.NewID() }

// Store is the exchange's database: the aggregate of its concerns, whose methods it promotes.
type Store struct {
	// Pool is the connection pool every method uses. Production code goes through the methods;
	// tests reach it for raw SQL.
	Pool *pgxpool.Pool
	*feedlog.Log
	*bookkeeping.Book
	*accounts.Accounts
	*markets.Rows
	*batches.Writer
}

// The feed log's rows, which a batch writes and package feedlog reads.
type (
	EventBatch    = db.EventBatch
	AccountEvents = db.AccountEvents
)

// ErrTooManyKeys refuses a key past the most an account may hold (accounts.ErrTooManyKeys). The
// accounts' rows are named in their own package's words (accounts.KeyRecord, accounts.APIKey, ...),
// as are the operator's (bookkeeping.Shard) and the markets' (markets.OrderFilter).
var ErrTooManyKeys = accounts.ErrTooManyKeys

// The operator's books' rows and refusals that the store's callers name (internal/store/bookkeeping).
type (
	Ownership = db.Ownership
	Route     = bookkeeping.Route
)

var (
	ErrSuperseded    = bookkeeping.ErrSuperseded
	ErrTargetNotLive = bookkeeping.ErrTargetNotLive
	ErrSplitsEvent   = bookkeeping.ErrSplitsEvent
)

// DefaultMaxConns is the most connections one process's pool opens when its database URL sets no
// pool_max_conns (db.DefaultMaxConns).
func DefaultMaxConns() int { return db.DefaultMaxConns() }

// Open connects to the database at url and checks that it answers.
func Open(ctx context.Context, url string) (*Store, error) { return OpenHolding(ctx, url, 0) }

// OpenHolding is Open for a process whose matching loops hold held connections of the pool for
// good (db.OpenHolding).
func OpenHolding(ctx context.Context, url string, held int) (*Store, error) {
	pool, err := db.OpenHolding(ctx, url, held)
	if err != nil {
		return nil, err
	}
	return New(pool), nil
}

// New is the store on a pool already open, each concern on it: a Store is never made as a
// literal, whose concerns would be nil.
func New(pool *pgxpool.Pool) *Store {
	return &Store{Pool: pool, Log: feedlog.New(pool), Book: bookkeeping.New(pool),
		Accounts: accounts.New(pool), Rows: markets.New(pool), Writer: batches.New(pool)}
}

// ApplicationName is what a pmx process's connections tell Postgres they are, where the database
// URL names nothing (db.ApplicationName).
func ApplicationName() string { return db.ApplicationName() }

// Close closes every connection.
func (s *Store) Close() { s.Pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.Pool.Ping(ctx) }

// Acquire takes a connection of the pool for the caller's own use, until it releases it.
func (s *Store) Acquire(ctx context.Context) (*pgxpool.Conn, error) { return s.Pool.Acquire(ctx) }

// Migrate brings the schema up to date with the migrations embedded in this binary, returning the
// version before and after. Concurrent callers are safe: tern serialises them with an advisory lock.
// A schema newer than this binary's migrations (from > to) is left as it is: a later release
// migrated it, and each migration keeps the schema usable by the release before it.
func (s *Store) Migrate(ctx context.Context) (from, to int32, err error) {
	return db.Migrate(ctx, s.Pool)
}

// The batch writer's rows, refusals and checks, which the shard and its tests name
// (internal/store/batches).
type (
	Batch          = batches.Batch
	BatchConn      = batches.BatchConn
	Begin          = batches.Begin
	CashDelta      = batches.CashDelta
	Claim          = batches.Claim
	ClientOrderKey = batches.ClientOrderKey
	Committed      = batches.Committed
	EventChange    = batches.EventChange
	Fence          = batches.Fence
	GroupDelta     = batches.GroupDelta
	GroupState     = batches.GroupState
	Holding        = batches.Holding
	Locked         = batches.Locked
	MarketUpdate   = batches.MarketUpdate
	Risk           = batches.Risk
	Need           = batches.Need
	SettledHolding = batches.SettledHolding
	Settlement     = batches.Settlement
	ShareDelta     = batches.ShareDelta
	ShareKey       = batches.ShareKey
	TradeRow       = batches.TradeRow
	TrippedOrder   = batches.TrippedOrder
)

var (
	ErrTooManyOrderGroups = batches.ErrTooManyOrderGroups
	ErrGroupHasOpenOrders = batches.ErrGroupHasOpenOrders
	ErrClaimed            = batches.ErrClaimed
	ErrCommitUnknown      = batches.ErrCommitUnknown
)

const (
	NoLimit        = batches.NoLimit
	OrderGroupIdle = batches.OrderGroupIdle
)

// BeginBatch begins a batch's transaction on conn and locks what it reads (batches.BeginBatch).
func BeginBatch(ctx context.Context, conn *pgx.Conn, b Begin) (Locked, error) {
	return batches.BeginBatch(ctx, conn, b)
}

// CommitBatch writes a batch and commits its transaction (batches.CommitBatch).
func CommitBatch(ctx context.Context, conn *pgx.Conn, b *Batch) (Committed, error) {
	return batches.CommitBatch(ctx, conn, b)
}

// Refused reports whether a batch failed on one of the database's guards (batches.Refused).
func Refused(err error) bool { return batches.Refused(err) }

// Fenced reports whether a batch failed its fence (batches.Fenced).
func Fenced(err error) bool { return batches.Fenced(err) }

// HaltsMoved reports whether a batch failed its check of the halts (batches.HaltsMoved).
func HaltsMoved(err error) bool { return batches.HaltsMoved(err) }

// Retryable reports whether a batch may simply be run again (batches.Retryable).
func Retryable(err error) bool { return batches.Retryable(err) }

// AllocationMissing reports whether a batch found an allocation row it took as written missing
// (batches.AllocationMissing).
func AllocationMissing(err error) bool { return batches.AllocationMissing(err) }

// Unreachable reports whether err is the database being out of reach (batches.Unreachable).
func Unreachable(err error) bool { return batches.Unreachable(err) }

// ClaimLost reports whether err is a standalone claim lost (batches.ClaimLost).
func ClaimLost(err error) bool { return batches.ClaimLost(err) }
