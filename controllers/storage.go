package controllers

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// The operator names what each of its parts asks of the database as the small interfaces below,
// grouped by concern (markets' and events' rows, the operator's books), rather than taking the
// whole store: its command (internal/cmd/operator) and the tests hand them *store.Store, which
// has them all. The rows they are spelt in are their concerns' (bookkeeping.Shard, ...).

// MarketStore is everything the Market reconciler asks of the database (MarketReconciler.Store).
type MarketStore interface {
	MarketRows
	Placement
}

// EventStore is everything the Event reconciler asks of the database (EventReconciler.Store).
type EventStore interface {
	EventRows
}

// SeriesStore is everything the MarketSeries reconciler asks of the database
// (SeriesReconciler.Store): the series' rows and the links of its instances' rows.
type SeriesStore interface {
	// RecordSeries stores a series under its name, keeping the id of one recorded before.
	RecordSeries(ctx context.Context, s records.Series) (records.Series, error)
	// EndSeries marks the series of this name ended: no longer listed.
	EndSeries(ctx context.Context, name string, now time.Time) error
	// LinkSeries records markets, and events with their markets, as the series' instances.
	LinkSeries(ctx context.Context, series uuid.UUID, markets, events []uuid.UUID) error
}

// RebalanceStore is everything the Rebalancer asks of the database (Rebalancer.Store).
type RebalanceStore interface {
	OpenMarkets
	Loads
}

// ShardPoolStore is everything the ShardPool reconciler asks of the database
// (ShardPoolReconciler.Store): the shards' registrations, the markets each owns and the load each
// reported, as the Rebalancer reads them, marking a shard that is to go draining, and recording
// the shards each pool is to run.
type ShardPoolStore interface {
	// LiveShards lists the shards whose heartbeat is within ttl, with the OPEN markets each owns
	// and whether it drains.
	LiveShards(ctx context.Context, ttl time.Duration) ([]bookkeeping.Shard, error)
	// ShardLoads returns the load each live shard last reported, by shard and market.
	ShardLoads(ctx context.Context, ttl time.Duration) (map[string]map[uuid.UUID]float64, error)
	// OwnedMarkets lists the markets a shard owns, with their epochs and statuses.
	OwnedMarkets(ctx context.Context, shard string) ([]db.Ownership, error)
	// Drain marks a shard draining (migration 029): it keeps what it owns, and no market is moved
	// onto it.
	Drain(ctx context.Context, name string) error
	// Undrain takes a drain back: the shard takes markets again.
	Undrain(ctx context.Context, name string) error
	// DedicatedUnits counts the pool's OPEN dedicated markets of their own and events with an OPEN
	// dedicated market: each is owed a shard of its own.
	DedicatedUnits(ctx context.Context, pool string) (int, error)
	// ExpectShards records the names of the shards the pool is to run now (migration 040), none
	// removing its row: what a stopping shard of the pool waits for (Successors). An expectation
	// unchanged writes nothing.
	ExpectShards(ctx context.Context, pool string, shards []string) error
}

// HealthStore is what the operator's metrics read at each scrape (HealthCollector.Store).
type HealthStore interface {
	// Health reads each live shard's heartbeat and markets, and the OPEN markets with no live
	// owner or past their close, a shard being live while its heartbeat is within ttl.
	Health(ctx context.Context, ttl time.Duration) (bookkeeping.Health, error)
}

// MarketRows read and write markets' rows, the Market resource's records (marketspec.Record
// writes them).
type MarketRows interface {
	marketspec.Rows
}

// EventRows read and write events' rows, the Event resource's records (eventrec.Record writes
// them, eventrec.Pause and SetFees their pause and fee schedule), and read an event's markets.
type EventRows interface {
	eventrec.Rows
	EventMarkets(ctx context.Context, e records.Event) ([]records.Market, error)
	// The event's pause and fee schedule (spec.paused, spec.fees), which eventrec.Pause and
	// eventrec.SetFees write.
	eventrec.HaltRows
}

// OpenMarkets lists the markets of one status.
type OpenMarkets interface {
	Markets(ctx context.Context, status domain.MarketStatus) ([]records.Market, error)
}

// Placement is the operator's books as the Market reconciler schedules a market by them: the
// live shards, the owners of an event's markets, and giving a market to a shard.
type Placement interface {
	// LiveShards lists the shards whose heartbeat is within ttl, least loaded first.
	LiveShards(ctx context.Context, ttl time.Duration) ([]bookkeeping.Shard, error)
	// EventOwners lists the shard of each of an event's markets that has one.
	EventOwners(ctx context.Context, event uuid.UUID) ([]string, error)
	// Assign gives a market to a shard ("" for none) under a new epoch, unless it is settled or
	// already the shard's, and returns its ownership afterwards.
	Assign(ctx context.Context, market uuid.UUID, shard string) (db.Ownership, error)
	// SetMarketPlacement records the pool a market is served by and whether it has a shard of its
	// own (spec.shardPool, spec.placement), and says whether that changed anything.
	SetMarketPlacement(ctx context.Context, id uuid.UUID, pool string, dedicated bool) (bool, error)
}

// Loads is the operator's books as the Rebalancer balances by them: the live shards, the load
// each reported, and moving markets between two of them.
type Loads interface {
	LiveShards(ctx context.Context, ttl time.Duration) ([]bookkeeping.Shard, error)
	// ShardLoads returns the load each live shard last reported, by shard and market.
	ShardLoads(ctx context.Context, ttl time.Duration) (map[string]map[uuid.UUID]float64, error)
	// Move moves markets from one shard to another under the next epoch, fenced (a failover's
	// move): moved is false when they were no longer from's.
	Move(ctx context.Context, markets []uuid.UUID, from, to string) (moved bool, err error)
}
