package controllers

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// RebalancePolicy bounds how the operator spreads markets over the live shards
// (docs/architecture.md §6, "Spread"). Every move is the unplanned one of a failover (§7): the new
// owner takes over under the next epoch, and a client may see 503s for a second or two, so moves
// are few, one at a time and never of a market that has just moved.
type RebalancePolicy struct {
	// Margin is how far the spread may be off before markets move: the most and least loaded live
	// shards may differ by up to Margin times the mean share (0.2: 20%). A shard that joins or
	// returns is filled whatever the margin.
	Margin float64
	// Interval is the least time between two moves.
	Interval time.Duration
	// Cooldown is how long a moved market (any market of a moved event) stays where it is; also how
	// long an operator waits after it starts (or takes the lead) before its first move, since it does
	// not know what moved before.
	Cooldown time.Duration
	// MaxFraction bounds the markets in motion: those moved within Cooldown, the next move's
	// included, are at most this fraction of the OPEN markets on live shards (at least one market).
	MaxFraction float64
}

// DefaultRebalancePolicy is `pmx operator`'s default.
var DefaultRebalancePolicy = RebalancePolicy{Margin: 0.2, Interval: 5 * time.Second, Cooldown: time.Minute, MaxFraction: 0.1}

// Validate says what is wrong with a policy, in the terms of `pmx operator`'s flags.
func (p RebalancePolicy) Validate() error {
	switch {
	case p.Margin < 0 || math.IsNaN(p.Margin):
		return fmt.Errorf("--rebalance-margin is %v; give a fraction of the mean share of 0 or more, such as 0.2", p.Margin)
	case p.Interval <= 0:
		return fmt.Errorf("--rebalance-interval is %v; give a positive duration between moves, such as 5s", p.Interval)
	case p.Cooldown < 0:
		return fmt.Errorf("--rebalance-cooldown is %v; give a duration of 0 or more, such as 1m", p.Cooldown)
	case !(p.MaxFraction > 0 && p.MaxFraction <= 1):
		return fmt.Errorf("--rebalance-max-fraction is %v; give a fraction above 0 and at most 1, such as 0.1", p.MaxFraction)
	}
	return nil
}

// arrival says why a live shard is owed markets beyond the margin.
type arrival string

const (
	shardJoined   arrival = "joined"   // live for the first time since the operator started
	shardReturned arrival = "returned" // live again after its heartbeat lapsed
)

// rebalanceShard is a live shard as the planner sees it.
type rebalanceShard struct {
	name    string
	arrival arrival // "" for a shard that has been live all along
	// reportsLoad: the shard reports its markets' orders per second (a release before does not).
	reportsLoad bool
}

// rebalanceUnit is what moves as one: an OPEN market of its own, or all the OPEN markets of an
// event, on one live shard.
type rebalanceUnit struct {
	key string // the market's or the event's id
	// place is its pool and whether it asked for a shard of its own (package placement).
	place   placement.Unit
	event   bool
	markets []uuid.UUID
	shard   string
	// load is the unit's orders per second over a recent window; 0 when no shard reports it.
	load float64
	// movedAt is the last move of any of its markets (zero: none since the operator started).
	movedAt time.Time
}

// size is the unit's weight in the spread by count: an event counts as many as its markets.
func (u rebalanceUnit) size() int { return len(u.markets) }

// rebalanceInput is everything a rebalancing decision looks at.
type rebalanceInput struct {
	now      time.Time
	started  time.Time // when this operator started leading
	lastMove time.Time // its last rebalancing move (zero: none)
	shards   []rebalanceShard
	units    []rebalanceUnit // units on other shards than these are the reconcilers' to schedule
}

// rebalanceMove is one move the planner chose.
type rebalanceMove struct {
	unit     rebalanceUnit
	from, to string
	kind     string // why, in a word: joined, returned, skew or placement (the metric's label)
	reason   string // why, for the Market's event
}

// planRebalance decides the next rebalancing move, if any: the unit to move from the most loaded
// live shard to the least loaded one. Shards are weighed by their count of markets; once every live
// shard reports load and some unit has any, by their share of the markets plus their share of the
// orders per second. It moves only
//   - when a shard joined or returned (and is still owed markets), or the spread exceeds the margin;
//   - a unit whose move narrows the gap between the two shards (weight < gap), the one that brings
//     them closest to even;
//   - no unit any of whose markets moved within the cooldown, and none until a cooldown after start;
//   - at most one move per interval, and never more than MaxFraction of the markets in motion.
//
// balanced is true when no move would narrow the spread whatever the bounds: a shard that joined
// or returned has been given its share.
func planRebalance(in rebalanceInput, p RebalancePolicy) (mv rebalanceMove, ok, balanced bool) {
	if len(in.shards) < 2 {
		return mv, false, true
	}
	live := map[string]bool{}
	reports := true
	for _, s := range in.shards {
		live[s.name] = true
		reports = reports && s.reportsLoad
	}
	var units []rebalanceUnit
	markets, inMotion, load := 0, 0, 0.0
	count, orders := map[string]int{}, map[string]float64{} // per shard, for the reason
	for _, u := range in.units {
		if !live[u.shard] {
			continue
		}
		units = append(units, u)
		markets += u.size()
		load += u.load
		count[u.shard] += u.size()
		orders[u.shard] += u.load
		if !u.movedAt.IsZero() && in.now.Sub(u.movedAt) < p.Cooldown {
			inMotion += u.size()
		}
	}
	// By load, a unit weighs its share of the markets plus its share of the orders: busy markets
	// spread as evenly as the count, and idle ones still count.
	byLoad := reports && load > 0
	weight := func(u rebalanceUnit) float64 {
		if byLoad {
			return float64(u.size())/float64(markets) + u.load/load
		}
		return float64(u.size())
	}
	total := map[string]float64{}
	for _, u := range units {
		total[u.shard] += weight(u)
	}
	// Most loaded first, then by name; a shard owed markets last among equals, so that of those
	// tied for least loaded it is the target.
	shards := slices.Clone(in.shards)
	slices.SortFunc(shards, func(a, b rebalanceShard) int {
		if c := -compareFloat(total[a.name], total[b.name]); c != 0 {
			return c
		}
		if (a.arrival == "") != (b.arrival == "") {
			if a.arrival == "" {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	target := shards[len(shards)-1]
	sum := 0.0
	for _, s := range shards {
		sum += total[s.name]
	}
	mean := sum / float64(len(shards))
	spread := total[shards[0].name] - total[target.name]
	skewed := spread > p.Margin*mean
	arrived := false
	for _, s := range shards {
		arrived = arrived || s.arrival != ""
	}

	// The best unit to move to the target, if any narrows the gap; eligible: within the bounds.
	bound := max(1, int(math.Floor(p.MaxFraction*float64(markets))))
	var best *rebalanceUnit
	var bestFrom rebalanceShard
	var bestScore float64
	anyNarrows := false
	for _, from := range shards {
		gap := total[from.name] - total[target.name]
		if from.name == target.name || gap <= 0 {
			break
		}
		for i := range units {
			u := &units[i]
			w := weight(*u)
			if u.shard != from.name || w <= 0 || w >= gap-1e-9 { // by load, a float's rounding is no gap
				continue
			}
			anyNarrows = true
			if !u.movedAt.IsZero() && in.now.Sub(u.movedAt) < p.Cooldown || inMotion+u.size() > bound {
				continue
			}
			// The unit that leaves the two shards nearest even; fewer markets, then the key, among equals.
			score := math.Abs(gap - 2*w)
			if best == nil || score < bestScore || score == bestScore &&
				(u.size() < best.size() || u.size() == best.size() && u.key < best.key) {
				best, bestFrom, bestScore = u, from, score
			}
		}
		if best != nil {
			break // the most loaded shard that can give, gives
		}
	}
	balanced = !anyNarrows
	if best == nil || !skewed && !arrived || !in.lastMove.IsZero() && in.now.Sub(in.lastMove) < p.Interval ||
		in.now.Sub(in.started) < p.Cooldown {
		return mv, false, balanced
	}
	mv = rebalanceMove{unit: *best, from: bestFrom.name, to: target.name}
	shares := spreadOf(shards, count, orders, byLoad)
	switch {
	case target.arrival != "":
		mv.kind = string(target.arrival)
		mv.reason = fmt.Sprintf("shard %s %s (%s)", target.name, target.arrival, shares)
	default:
		mv.kind = "skew"
		mv.reason = fmt.Sprintf("the spread over the live shards is off by more than %.0f%% (%s)", p.Margin*100, shares)
	}
	return mv, true, balanced
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// spreadOf writes each shard's share, most loaded first: "markets: shard-a 3, shard-b 3, shard-c
// 0", or by load "markets and orders/s: shard-a 3 and 12.5, ...".
func spreadOf(shards []rebalanceShard, count map[string]int, orders map[string]float64, byLoad bool) string {
	parts := make([]string, len(shards))
	for i, s := range shards {
		parts[i] = fmt.Sprintf("%s %d", s.name, count[s.name])
		if byLoad {
			parts[i] += " and " + strconv.FormatFloat(orders[s.name], 'f', -1, 64)
		}
	}
	if byLoad {
		return "markets and orders/s: " + strings.Join(parts, ", ")
	}
	return "markets: " + strings.Join(parts, ", ")
}

// planPlacement decides the next move that puts a unit where its placement asks, before any move
// to spread (planRebalance): a unit on a live shard of another pool than its own goes to one of its
// pool; a dedicated unit that shares its shard goes to a free shard of its pool; a shared unit on
// a shard dedicated to another goes to a shared shard of its pool. Each target is the one
// placement.Choose gives among the live shards but its own; a dedicated unit that finds no free
// shard, or a shared one no shared shard, stays (its Market's Dedicated condition says why).
// Dedicated units are looked at first, so that a shard shared with one empties by moving it rather
// than the others. The same bounds as the spread's hold: none within a cooldown after start, one
// move per interval, and no unit that moved within the cooldown.
func planPlacement(in rebalanceInput, live []bookkeeping.Shard, p RebalancePolicy) (mv rebalanceMove, ok bool) {
	if in.now.Sub(in.started) < p.Cooldown || !in.lastMove.IsZero() && in.now.Sub(in.lastMove) < p.Interval {
		return mv, false
	}
	units := slices.Clone(in.units)
	slices.SortStableFunc(units, func(a, b rebalanceUnit) int {
		if a.place.Dedicated != b.place.Dedicated {
			if a.place.Dedicated {
				return -1
			}
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
	for _, u := range units {
		at := slices.IndexFunc(live, func(s bookkeeping.Shard) bool { return s.Name == u.shard })
		if at < 0 || !u.movedAt.IsZero() && in.now.Sub(u.movedAt) < p.Cooldown {
			continue // not live: the Market reconciler's to schedule
		}
		s := live[at]
		pool, anywhere := placement.Pool(u.place.Pool), false
		var why string
		switch {
		case placement.Pool(s.Pool) != pool:
			why, anywhere = fmt.Sprintf("its pool is %s, and shard %s is of pool %s", pool, s.Name, placement.Pool(s.Pool)), true
		case u.place.Dedicated && !placement.Alone(s):
			why = fmt.Sprintf("it has a shard of its own, and shard %s serves other markets", s.Name)
		case !u.place.Dedicated && s.DedicatedTo != "" && s.DedicatedTo != u.key:
			why = fmt.Sprintf("shard %s is dedicated to %s", s.Name, s.DedicatedTo)
		default:
			continue
		}
		to, fits := elsewhere(live, at, u.place)
		if to == "" || !fits && !anywhere {
			continue
		}
		return rebalanceMove{unit: u, from: s.Name, to: to, kind: "placement", reason: why}, true
	}
	return mv, false
}

// elsewhere is the shard placement.Choose gives unit u among the live shards but live[at], its
// own, and whether it fits there ("" for none).
func elsewhere(live []bookkeeping.Shard, at int, u placement.Unit) (string, bool) {
	others := slices.Delete(slices.Clone(live), at, at+1)
	i, fits := placement.Choose(others, u)
	if i < 0 {
		return "", false
	}
	return others[i].Name, fits
}

// planSpread decides the next move to spread the units within each pool (planRebalance, pool by
// pool in the order of their names, the first that moves), over the pool's shards that no
// dedicated unit holds and among its shared units. balanced is true when every pool is. A pool
// waits while one of its dedicated units shares a shard and a free one is live.
func planSpread(in rebalanceInput, live []bookkeeping.Shard, p RebalancePolicy) (mv rebalanceMove, ok, balanced bool) {
	poolOf := map[string]string{} // the shared shards, by name
	pools := map[string]bool{}
	for _, s := range live {
		if s.DedicatedTo == "" {
			poolOf[s.Name] = placement.Pool(s.Pool)
			pools[placement.Pool(s.Pool)] = true
		}
	}
	// A pool with a dedicated unit that shares its shard while a free one is live keeps that shard
	// free for it (planPlacement moves it once its cooldown is over) rather than spread onto it.
	waits := map[string]bool{}
	for _, u := range in.units {
		at := slices.IndexFunc(live, func(s bookkeeping.Shard) bool { return s.Name == u.shard })
		if !u.place.Dedicated || at < 0 || placement.Alone(live[at]) {
			continue
		}
		if _, fits := elsewhere(live, at, u.place); fits {
			waits[placement.Pool(u.place.Pool)] = true
		}
	}
	balanced = true
	for _, pool := range slices.Sorted(maps.Keys(pools)) {
		if waits[pool] {
			balanced = false
			continue
		}
		sub := in
		sub.shards, sub.units = nil, nil
		for _, s := range in.shards {
			if poolOf[s.name] == pool {
				sub.shards = append(sub.shards, s)
			}
		}
		for _, u := range in.units {
			if !u.place.Dedicated && poolOf[u.shard] == pool && placement.Pool(u.place.Pool) == pool {
				sub.units = append(sub.units, u)
			}
		}
		m, found, b := planRebalance(sub, p)
		balanced = balanced && b
		if found && !ok {
			mv, ok = m, true
		}
	}
	return mv, ok, balanced
}
