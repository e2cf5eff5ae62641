package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// Set runs several shards in one process, each with its own batch loop and Postgres
// connection, and spreads the markets across them: a market is given to the shard holding the
// fewest markets the first time the set sees it, and stays there for the life of the process, so
// exactly one goroutine ever matches it. The shards commit in parallel; what they share is the
// accounts, whose cash each reserves from its own views without locks (views.go), so that they do
// not take turns on the accounts' rows.
//
// A Set offers the calls of one Shard. Calls naming one market go to its shard; batches of
// placements and cancels are split by shard, run at once, and answered in the caller's order.
type Set struct {
	cfg    Config
	shards []*Shard

	mu     sync.Mutex
	owner  map[uuid.UUID]int // market → index of its shard
	counts []int             // markets given to each shard
}

// NewSet starts n shards (at least one) configured alike; each registers its metrics with a
// "shard" label of its index, and logs it as "slot". Call Stop to drain and stop them.
//
// With a Name, the set is one named shard process (pmx shard): its shards share the name, so
// Postgres and the operator see one shard; each serves the markets assigned to the process that
// the set gives it, and Run keeps the process registered.
func NewSet(cfg Config, n int) *Set {
	n = max(n, 1)
	set := &Set{cfg: cfg, owner: map[uuid.UUID]int{}, counts: make([]int, n)}
	for i := range n {
		c := cfg
		c.Holder = cmp.Or(cfg.Holder, cfg.Name, "standalone") + "#" + strconv.Itoa(i)
		c.Spread = cmp.Or(cfg.Spread, n)
		c.owns = func(id uuid.UUID) bool { return set.owns(i, id) }
		c.ownsEvent = func(id, event uuid.UUID) bool { return set.assignWithEvent(id, event) == i }
		c.noPruning = i > 0 // one pruner of old events is enough
		if cfg.Metrics != nil {
			c.Metrics = prometheus.WrapRegistererWith(prometheus.Labels{"shard": strconv.Itoa(i)}, cfg.Metrics)
		}
		if cfg.Logger != nil && n > 1 {
			c.Logger = cfg.Logger.With("slot", i)
		}
		set.shards = append(set.shards, New(c))
	}
	return set
}

// Run keeps a named set registered until ctx ends (Shard.Run: it returns store.ErrSuperseded when
// another process registers under the name), each of its shards holding the markets assigned to
// the process that are its own.
func (set *Set) Run(ctx context.Context, reg Registration) error {
	log := set.cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return register(ctx, set.cfg.Store, set.cfg.Name, log.With("component", "shard"), reg, set.shards)
}

// Stop stops every shard, each after finishing the commands it accepted.
func (set *Set) Stop() {
	var wg sync.WaitGroup
	for _, s := range set.shards {
		wg.Go(s.Stop)
	}
	wg.Wait()
}

// assign returns the index of a market's shard, giving the market to the least busy shard when
// the set has not seen it yet. Only markets that exist are given out: markets are never deleted,
// so a market keeps its shard for the life of the process.
func (set *Set) assign(id uuid.UUID) int {
	set.mu.Lock()
	defer set.mu.Unlock()
	i, ok := set.owner[id]
	if !ok {
		i = 0
		for j, n := range set.counts {
			if n < set.counts[i] {
				i = j
			}
		}
		set.owner[id] = i
		set.counts[i]++
	}
	return i
}

// owns reports whether shard i serves a market that exists and is no event's (its loads and
// sweeps have read it); Shard.serves asks assignWithEvent for an event's, which owns would split.
func (set *Set) owns(i int, id uuid.UUID) bool { return set.assign(id) == i }

// of returns the index of a market's shard. A market the set has not seen yet is read from
// Postgres first: one that does not exist is domain.ErrUnknownMarket, as a shard answers it, and
// is given to no shard, so that requests naming made-up markets do not fill the set's table.
func (set *Set) of(ctx context.Context, id uuid.UUID) (int, error) {
	set.mu.Lock()
	i, ok := set.owner[id]
	set.mu.Unlock()
	if ok {
		return i, nil
	}
	row, err := set.cfg.Store.Market(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, domain.ErrUnknownMarket
	} else if err != nil {
		set.shards[0].log.Warn("could not read a market to route it", "market", id, "err", err)
		return 0, exchange.ErrUnavailable
	}
	if row.EventID != nil {
		return set.assignWithEvent(id, *row.EventID), nil
	}
	return set.assign(id), nil
}

// Place places an order on its market's shard.
func (set *Set) Place(ctx context.Context, r exchange.PlaceRequest) (records.PlacedOrder, error) {
	i, err := set.of(ctx, r.Market)
	if err != nil {
		return records.PlacedOrder{}, err
	}
	return set.shards[i].Place(ctx, r)
}

// Cancel cancels an order on its market's shard.
func (set *Set) Cancel(ctx context.Context, r exchange.CancelRequest) (records.Order, error) {
	i, err := set.of(ctx, r.Market)
	if err != nil {
		return records.Order{}, err
	}
	return set.shards[i].Cancel(ctx, r)
}

// Amend amends an order on its market's shard.
func (set *Set) Amend(ctx context.Context, r exchange.AmendRequest) (records.PlacedOrder, error) {
	i, err := set.of(ctx, r.Market)
	if err != nil {
		return records.PlacedOrder{}, err
	}
	return set.shards[i].Amend(ctx, r)
}

// Transition applies a lifecycle action on the market's shard.
func (set *Set) Transition(ctx context.Context, id uuid.UUID, action domain.MarketAction) error {
	i, err := set.of(ctx, id)
	if err != nil {
		return err
	}
	return set.shards[i].Transition(ctx, id, action)
}

// OrderBook reads a market's committed book from its shard.
func (set *Set) OrderBook(ctx context.Context, id uuid.UUID) (*exchange.Snapshot, error) {
	i, err := set.of(ctx, id)
	if err != nil {
		return nil, err
	}
	return set.shards[i].OrderBook(ctx, id)
}

// split groups the indexes 0..n-1 by the shard of each one's market, in order within each; the
// error of any whose market cannot be routed goes to fail.
func (set *Set) split(ctx context.Context, n int, market func(int) uuid.UUID, fail func(int, error)) map[int][]int {
	groups := map[int][]int{}
	for i := range n {
		s, err := set.of(ctx, market(i))
		if err != nil {
			fail(i, err)
			continue
		}
		groups[s] = append(groups[s], i)
	}
	return groups
}

// PlaceMany places each shard's share of the orders in one batch there, the shards at once, and
// answers each order in its place.
func (set *Set) PlaceMany(ctx context.Context, rs []exchange.PlaceRequest) []exchange.PlaceResult {
	out := make([]exchange.PlaceResult, len(rs))
	groups := set.split(ctx, len(rs), func(i int) uuid.UUID { return rs[i].Market }, func(i int, err error) { out[i].Err = err })
	var wg sync.WaitGroup
	for s, idx := range groups {
		wg.Go(func() {
			in := make([]exchange.PlaceRequest, len(idx))
			for j, i := range idx {
				in[j] = rs[i]
			}
			for j, res := range set.shards[s].PlaceMany(ctx, in) {
				out[idx[j]] = res
			}
		})
	}
	wg.Wait()
	return out
}

// CancelMany cancels each shard's share of the orders in one batch there, the shards at once.
func (set *Set) CancelMany(ctx context.Context, rs []exchange.CancelRequest) []exchange.CancelResult {
	out := make([]exchange.CancelResult, len(rs))
	groups := set.split(ctx, len(rs), func(i int) uuid.UUID { return rs[i].Market }, func(i int, err error) { out[i].Err = err })
	var wg sync.WaitGroup
	for s, idx := range groups {
		wg.Go(func() {
			in := make([]exchange.CancelRequest, len(idx))
			for j, i := range idx {
				in[j] = rs[i]
			}
			for j, res := range set.shards[s].CancelMany(ctx, in) {
				out[idx[j]] = res
			}
		})
	}
	wg.Wait()
	return out
}

// CancelAll cancels an account's resting orders in the markets on every shard holding one of
// them, at once, and answers them in the order of markets. Markets that do not exist are passed
// over, as a shard passes them over.
func (set *Set) CancelAll(ctx context.Context, account int64, markets []uuid.UUID) ([]records.Order, error) {
	var unroutable []error
	groups := set.split(ctx, len(markets), func(i int) uuid.UUID { return markets[i] }, func(_ int, err error) {
		if !errors.Is(err, domain.ErrUnknownMarket) {
			unroutable = append(unroutable, err)
		}
	})
	if err := errors.Join(unroutable...); err != nil {
		return nil, err
	}
	results := make([][]records.Order, len(set.shards))
	errs := make([]error, len(set.shards))
	var wg sync.WaitGroup
	for s, idx := range groups {
		wg.Go(func() {
			mine := make([]uuid.UUID, len(idx))
			for j, i := range idx {
				mine[j] = markets[i]
			}
			results[s], errs[s] = set.shards[s].CancelAll(ctx, account, mine)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	pos := make(map[uuid.UUID]int, len(markets))
	for i, id := range markets {
		if _, ok := pos[id]; !ok {
			pos[id] = i
		}
	}
	all := slices.Concat(results...)
	slices.SortStableFunc(all, func(a, b records.Order) int { return cmp.Compare(pos[a.MarketID], pos[b.MarketID]) })
	return all, nil
}

// CheckBooks compares every shard's books with Postgres (Shard.CheckBooks).
func (set *Set) CheckBooks(ctx context.Context) error {
	for _, s := range set.shards {
		if err := s.CheckBooks(ctx); err != nil {
			return err
		}
	}
	return nil
}

// assignWithEvent gives a market of an event the shard of its event, so that a conversion and
// the event's move are one shard's batch: the event is assigned as a unit, by its id.
func (set *Set) assignWithEvent(id, event uuid.UUID) int {
	i := set.assign(event)
	set.mu.Lock()
	defer set.mu.Unlock()
	if j, ok := set.owner[id]; ok {
		return j
	}
	set.owner[id] = i
	return i
}

// TransitionEvent moves an event's markets on their shard (Shard.TransitionEvent).
func (set *Set) TransitionEvent(ctx context.Context, id uuid.UUID, a domain.EventAction) error {
	e, err := set.cfg.Store.Event(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return domain.ErrEventNotFound
	} else if err != nil {
		return err
	}
	i := -1
	for _, o := range e.Outcomes { // each is given the event's shard, if not yet given
		j, err := set.of(ctx, o.MarketID)
		if err != nil {
			return err
		}
		if i >= 0 && j != i {
			return fmt.Errorf("event %s's markets are on different shards: %w", id, exchange.ErrUnavailable)
		}
		i = j
	}
	return set.shards[i].TransitionEvent(ctx, id, a)
}
