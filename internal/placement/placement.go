// Package placement owns the rule of where a market may be served: which live shard may take a
// unit (a market of its own, or every market of an event, which move together) given the unit's
// shard pool and whether it asked for a shard of its own. The operator's scheduling of a market
// without a live owner, its rebalancer, its drains of a ShardPool's shards and a stopping shard's
// own handoffs all ask Takes, so that no path puts a market outside its pool or beside a dedicated
// one (docs/architecture.md §6, "Pools and dedicated shards").
package placement

import (
	"log/slog"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// DefaultPool is the pool of a shard started without --pool, and of a market whose spec names
// none: the chart's default ShardPool, and every shard of pmx dev.
const DefaultPool = "default"

// Pool is name, or DefaultPool when name is empty.
func Pool(name string) string {
	if name == "" {
		return DefaultPool
	}
	return name
}

// Unit is what moves as one: a market of its own, or all the markets of an event.
type Unit struct {
	// Key is the market's id, or the event's for an event's markets: a dedicated shard is
	// dedicated to one key (bookkeeping.Shard.DedicatedTo).
	Key string
	// Pool is the ShardPool whose shards may serve it ("" is DefaultPool).
	Pool string
	// Dedicated asks for a shard that serves nothing else.
	Dedicated bool
}

// UnitOf is the unit a market belongs to, by its row: its event's, or its own.
func UnitOf(m records.Market) Unit {
	return Unit{Key: KeyOf(m.ID, m.EventID), Pool: m.Pool, Dedicated: m.Dedicated}
}

// KeyOf is the key of the unit of market id, of event (nil for a market of its own).
func KeyOf(id uuid.UUID, event *uuid.UUID) string {
	if event != nil {
		return event.String()
	}
	return id.String()
}

// Takes says whether shard s may be given u: s is not draining and is of u's pool; a shard
// dedicated to a unit takes that unit only; a dedicated unit goes only to a shard that serves no
// OPEN market (or that is already dedicated to it).
func Takes(s bookkeeping.Shard, u Unit) bool {
	switch {
	case s.Draining || Pool(s.Pool) != Pool(u.Pool):
		return false
	case s.DedicatedTo != "":
		return s.DedicatedTo == u.Key
	case u.Dedicated:
		return s.Units == 0
	}
	return true
}

// Alone says whether a unit with an OPEN market on shard s has it to itself.
func Alone(s bookkeeping.Shard) bool { return s.Units <= 1 }

// Choose picks the shard of shards to give unit u, which has no live owner or must leave its own:
// of those that Take it, the one with the fewest OPEN markets (the first of those tied, so that
// live shards sorted least loaded first keep their order). When none may take it, a market still
// needs a shard to trade on: a dedicated unit then goes to the least loaded shard of its pool that
// is not dedicated to another unit, and failing that, like a shared unit that finds every shard of
// its pool dedicated, to the least loaded shard of its pool not draining. fits says whether the
// shard chosen Takes u: false, the unit is not where its placement asks, which the rebalancer
// mends once a shard frees up. best is -1 when no shard of u's pool is live and not draining.
func Choose(shards []bookkeeping.Shard, u Unit) (best int, fits bool) {
	best, tier := -1, 0
	for i, s := range shards {
		if s.Draining || Pool(s.Pool) != Pool(u.Pool) {
			continue
		}
		t := 1
		switch {
		case Takes(s, u):
			t = 3
		case s.DedicatedTo == "":
			t = 2
		}
		if t > tier || t == tier && s.Markets < shards[best].Markets {
			best, tier = i, t
		}
	}
	return best, tier == 3
}

// LogIgnored says, in a process that serves every market itself (pmx dev), that a resource's
// spec.shardPool and spec.placement are the operator's, when either is set: kind and name say
// which resource (a market, an event, a series).
func LogIgnored(log *slog.Logger, kind, name, pool, placement string) {
	if pool == "" && placement == "" {
		return
	}
	log.Info("spec.shardPool and spec.placement are the operator's: this process serves every market itself (docs/kubernetes.md, \"Shard pools\")",
		kind, name, "shardPool", pool, "placement", placement)
}
