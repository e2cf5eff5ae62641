package shardclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// handoffTimeout bounds a handoff as the operator waits for it: a shard's batch loop gives up on a
// transaction after 30 s, and a stuck shard must not hold the operator's rebalancing longer.
const handoffTimeout = 30 * time.Second

// HandOff, in the operator, moves markets from one live shard to another by the planned handoff:
// the old owner finishes what it has taken for them and moves them in Postgres itself, then the new
// owner is told to load them. An old owner of the release before the handoff (404), or one with no
// registered address, has them moved as before (store.Move: fenced, as in a failover). moved is
// false, with no error, when the old owner no longer owns them all: the caller looks again.
func (r *Router) HandOff(ctx context.Context, markets []uuid.UUID, from, to string) (moved bool, err error) {
	hc := r.client()
	ctx, cancel := context.WithTimeout(ctx, handoffTimeout)
	defer cancel()
	addr, err := r.Store.ShardAddress(ctx, from)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if addr == "" {
		return r.Store.Move(ctx, markets, from, to)
	}
	old := &shardClient{base: "http://" + addr, token: r.Token, http: hc}
	var handed shardproto.HandedV1
	err = r.noteVersion(old.call(ctx, http.MethodPost, shardproto.PathHandoff, shardproto.HandoffV1{Markets: markets, To: to}, &handed))
	switch {
	case errors.Is(err, shardproto.ErrOlderPeer):
		r.log.Info("the shard has no planned handoff (an older release): moving its markets as a failover does", "shard", from, "err", err)
		return r.Store.Move(ctx, markets, from, to)
	case errors.Is(err, exchange.ErrNotOwner):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("while shard %s handed %d markets to %s: %w", from, len(markets), to, err)
	case len(handed.Epochs) != len(markets):
		return true, fmt.Errorf("shard %s handed %d markets to %s and answered %d epochs", from, len(markets), to, len(handed.Epochs))
	}
	r.takeOver(ctx, markets, handed.Epochs, to)
	return true, nil
}

// takeOver tells the new owner of markets to load them now rather than on their first use or its
// next heartbeat. It only speeds the handoff up: a failure is logged.
func (r *Router) takeOver(ctx context.Context, markets []uuid.UUID, epochs []int64, to string) {
	addr, err := r.Store.ShardAddress(ctx, to)
	if err == nil && addr != "" {
		c := &shardClient{base: "http://" + addr, token: r.Token, http: r.client()}
		err = r.noteVersion(c.call(ctx, http.MethodPost, shardproto.PathTakeOver, shardproto.TakeOverV1{Markets: markets, Epochs: epochs}, nil))
	}
	if err != nil && !errors.Is(err, shardproto.ErrOlderPeer) {
		r.log.Warn("could not tell the new owner to load the markets handed to it; it loads them on first use", "shard", to, "err", err)
	}
}

// HandOffAll, in a shard process that stops (SIGTERM), hands every OPEN market it owns (from) to
// the other live shards — live within ttl — by the planned handoff on its own shards (ho), each
// unit (a market, or an event's markets together) to the one then holding the fewest markets, and
// tells each new owner to load them. What it cannot hand over (no other shard of the unit's pool
// is live, or a handoff fails) stays; the process's unregistering releases it as before, for the
// operator to schedule. It returns how many markets it handed over, and how many units stayed:
// those a later call may yet hand over, once a shard of their pool is live that takes them (the
// stopping shard's wait for its pool's successors, pmx shard).
func (r *Router) HandOffAll(ctx context.Context, from string, ho exchange.Handoff, ttl time.Duration) (handed, stayed int, err error) {
	return r.handOffAll(ctx, from, ttl, "could not hand markets over on stopping; they stay, for a later handoff or the release on unregistering",
		func(ctx context.Context, unit []uuid.UUID, to string) (bool, error) {
			epochs, err := ho.HandOff(ctx, unit, to)
			if err != nil {
				return false, err
			}
			r.takeOver(ctx, unit, epochs, to)
			return true, nil
		})
}

// HandOffShard, in the operator, empties a live shard that is to stop — one that a ShardPool's
// scale-down or deletion removes, which the operator has marked draining (store.Drain) — before
// its pod is told to: it hands every OPEN market the shard owns to the other live shards as
// HandOffAll does on the shard's own stop, each unit to the live shard, neither from nor
// draining, then holding the fewest markets, but from outside, by HandOff (the old owner moves the
// unit itself, then the new one is told to load it). A unit whose handoff fails stays where it is
// for the next call. It returns how many markets it handed over.
func (r *Router) HandOffShard(ctx context.Context, from string, ttl time.Duration) (int, error) {
	var failed []error
	n, _, err := r.handOffAll(ctx, from, ttl, "could not hand markets over from a shard being drained; trying again at the next look",
		func(ctx context.Context, unit []uuid.UUID, to string) (bool, error) {
			moved, err := r.HandOff(ctx, unit, from, to)
			if err != nil {
				failed = append(failed, err)
			}
			return moved, err
		})
	return n, errors.Join(append(failed, err)...)
}

// handOffAll hands every OPEN market that from owns, unit by unit (a market, or an event's
// markets together), to the live shard (within ttl) that placement.Choose gives the unit among
// the others — of its pool, not draining, a free one for a dedicated unit, the fewest markets
// first — with move; a unit whose move fails is logged with warn and left, and one that move says
// was no longer from's is not counted. A unit none of whose pool's other shards is live stays
// (logged once for each pool), as does one whose move failed (the shard that refused it is then
// left out of the rest of the call). It returns how many markets moved, and how many units stayed.
func (r *Router) handOffAll(ctx context.Context, from string, ttl time.Duration, warn string,
	move func(ctx context.Context, unit []uuid.UUID, to string) (bool, error)) (handed, stayed int, err error) {
	r.client()
	live, err := r.Store.LiveShards(ctx, ttl)
	if err != nil {
		return 0, 0, fmt.Errorf("while listing the live shards to hand markets to: %w", err)
	}
	others := slices.DeleteFunc(live, func(sh bookkeeping.Shard) bool { return sh.Name == from || sh.Draining })
	rows, err := r.Store.Markets(ctx, domain.MarketOpen)
	if err != nil {
		return 0, 0, fmt.Errorf("while listing the markets to hand over: %w", err)
	}
	type unit struct {
		placement.Unit
		markets []uuid.UUID
	}
	var units []unit
	events := map[uuid.UUID]int{}
	for _, m := range rows {
		if m.Shard == nil || *m.Shard != from {
			continue
		}
		if m.EventID == nil {
			units = append(units, unit{placement.UnitOf(m), []uuid.UUID{m.ID}})
			continue
		}
		i, ok := events[*m.EventID]
		if !ok {
			i = len(units)
			events[*m.EventID] = i
			units = append(units, unit{Unit: placement.UnitOf(m)})
		}
		units[i].markets = append(units[i].markets, m.ID)
	}
	// Dedicated units first, so that they find the free shards before shared ones fill them.
	slices.SortStableFunc(units, func(a, b unit) int {
		if a.Dedicated != b.Dedicated {
			if a.Dedicated {
				return -1
			}
			return 1
		}
		return 0
	})
	stay := map[string][]uuid.UUID{} // by pool, the markets of the units that stay
	var pools []string
	for _, u := range units {
		i, _ := placement.Choose(others, u.Unit)
		if i < 0 {
			p := placement.Pool(u.Pool)
			if _, ok := stay[p]; !ok {
				pools = append(pools, p)
			}
			stay[p] = append(stay[p], u.markets...)
			stayed++
			continue
		}
		to := others[i].Name
		moved, err := move(ctx, u.markets, to)
		if err != nil {
			// The unit is still from's, for a later call. The shard that refused it is not asked
			// for the rest in this one: it may have begun to stop since the list was read (the
			// chart's shards, SIGTERMed together, each find the other live at first).
			r.log.Warn(warn, "markets", u.markets, "from", from, "to", to, "err", err)
			others = slices.Delete(others, i, i+1)
			stayed++
			continue
		}
		if !moved {
			continue
		}
		others[i].Markets += len(u.markets)
		others[i].Units++
		if u.Dedicated && others[i].DedicatedTo == "" {
			others[i].DedicatedTo = u.Key
		}
		handed += len(u.markets)
	}
	for _, p := range pools {
		r.log.Warn("no live shard of the markets' pool to hand them to; they stay", "pool", p, "markets", len(stay[p]), "ids", stay[p], "from", from)
	}
	return handed, stayed, nil
}
