package shard

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// The shard names what it needs of the database as the small interfaces below, grouped by
// concern, rather than taking the whole store: the wiring (cmd/pmx, the test harnesses) hands it
// *store.Store, which has them all, and the scenario tests (scenario_*_test.go) an in-memory
// store of their own, so that the shard's engine-level logic is tested without Postgres. The
// row types (store.Batch, store.Locked, ...) stay the store's: they are the contract's words.

// Store is everything a shard asks of the database (Config.Store).
type Store interface {
	BatchConns
	BookReads
	EventReads
	FeedLog
	Bookkeeping
}

// BatchConns hands out the connection a shard's batches run on, one at a time: batches never wait
// behind the API's reads for a connection of the pool.
type BatchConns interface {
	BatchConn(ctx context.Context) (BatchConn, error)
}

// BatchConn is the store's contract for the connection batches run on (store.BatchConn): the
// batch writer's, whose words (store.Begin, store.Batch, ...) it is spelt in.
type BatchConn = store.BatchConn

// BookReads are the reads that load a market's book and what a batch reserves from, and answer
// for orders and order groups outside a batch.
type BookReads interface {
	Market(ctx context.Context, id uuid.UUID) (records.Market, error)
	// Sequences are the last order and trade numbers a market has used: an amend's move's
	// included, for ever.
	Sequences(ctx context.Context, market uuid.UUID) (orders, trades int64, err error)
	// RestingOrders are a market's resting orders in time priority.
	RestingOrders(ctx context.Context, market uuid.UUID) ([]records.Order, error)
	Holdings(ctx context.Context, market uuid.UUID) ([]store.Holding, error)
	OrderBySeq(ctx context.Context, market uuid.UUID, seq int64) (records.Order, error)
	// AcquireCash moves to holder's allocations what need asks, where the accounts have it, and
	// reads them with their limits (store.Acquire), for the views (views.go).
	AcquireCash(ctx context.Context, holder string, need []store.Need, spread int) (map[int64]int64, map[int64]store.Risk, error)
	TriggeredGroups(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error)
	TrippedOrders(ctx context.Context, shard string) ([]store.TrippedOrder, error)
	ConversionByRequest(ctx context.Context, account int64, clientRequestID string) (records.Conversion, error)
	// Halts reads every halt, and the fee schedules, as of one version (halts.go).
	Halts(ctx context.Context) (records.Halts, error)
	// ExchangeAccount is the exchange's own account, which the fees of fills are paid to.
	ExchangeAccount(ctx context.Context) (int64, error)
}

// EventReads read the events whose markets the shard moves together.
type EventReads interface {
	Event(ctx context.Context, id uuid.UUID) (records.Event, error)
	EventMarkets(ctx context.Context, e records.Event) ([]records.Market, error)
}

// FeedLog is the markets' feed log, which the shard writes with its batches and prunes.
type FeedLog interface {
	PruneEvents(ctx context.Context, cutoff time.Time) (int64, error)
}

// Bookkeeping is the operator's record of shard processes and the markets each owns: a named
// shard registers, heartbeats and reports its load there, and hands markets over through it.
type Bookkeeping interface {
	Register(ctx context.Context, name, address, pool string) (uuid.UUID, error)
	Beat(ctx context.Context, name, address string, incarnation uuid.UUID) error
	Incarnation(ctx context.Context, name string) (uuid.UUID, error)
	Unregister(ctx context.Context, name string, incarnation uuid.UUID) error
	ReportLoad(ctx context.Context, name string, incarnation uuid.UUID, load map[uuid.UUID]float64) error
	OwnedMarkets(ctx context.Context, shard string) ([]store.Ownership, error)
	HandOver(ctx context.Context, markets []uuid.UUID, epochs []int64, from, to string) (moved bool, err error)
}
