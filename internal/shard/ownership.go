package shard

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/store"
)

// Ownership, in distributed mode: the fence every batch checks before it commits, the sync that
// loads and drops markets to match what Postgres records as this shard's, and the heartbeat that
// keeps the shard registered and drives the sync.

// fence checks that the shard still owns every market it holds under the epoch it loaded it with
// — the ownership rows are locked by the batch's transaction, so no move can slip in before the
// commit. Commands on a market it lost fail with ErrNotOwner and the market is dropped.
func (s *Shard) fence(owners map[uuid.UUID]store.Ownership, cmds []*command) {
	for id, m := range s.markets {
		if o, ok := owners[id]; !ok || o.Shard != s.cfg.Name || o.Epoch != m.epoch {
			s.lose(id)
		}
	}
	for _, c := range cmds {
		if c.err != nil || c.kind == cmdCancelAll || c.kind == cmdSync || c.kind == cmdCheck || c.kind == cmdExpire || c.kind == cmdTakeOver {
			continue
		}
		if _, ok := s.markets[c.market]; !ok {
			c.err = exchange.ErrNotOwner
		}
		if c.kind == cmdConvert && c.err == nil && !s.ownsAll(c.convert.markets) {
			c.err = exchange.ErrNotOwner // a conversion needs every market of its event
		}
	}
}

// lose drops a market the shard held that another owns now (or the same name under a later
// epoch): a move it took no part in, unlike a handoff.
func (s *Shard) lose(id uuid.UUID) {
	s.metrics.fenced.Inc()
	s.drop(id)
}

// fenceOf is what a batch that did not read ownership when it began claims at its commit: the
// markets it touched, each under the epoch the shard loaded it with (store.Batch.Fence). A batch
// whose claim fails runs again, reading ownership first, and fence then fails the commands of the
// markets the shard lost.
func (s *Shard) fenceOf(touched map[uuid.UUID]*marketState) *store.Fence {
	f := &store.Fence{Shard: s.cfg.Name, Markets: slices.SortedFunc(maps.Keys(touched), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })}
	for _, id := range f.Markets {
		f.Epochs = append(f.Epochs, touched[id].epoch)
	}
	return f
}

// sync makes the set of markets held match the ownership recorded in Postgres (read when the
// shard's loads stood at readAt): it loads markets newly assigned to this shard and drops those it
// lost. A market loaded or handed over since the read is newer than it, and left as it is: a
// handoff's new owner may load a market between a heartbeat's read and its sync.
func (s *Shard) sync(ctx context.Context, owned []store.Ownership, readAt int64) {
	want := make(map[uuid.UUID]int64, len(owned))
	for _, o := range owned {
		want[o.Market] = o.Epoch
		if at, ok := s.handed[o.Market]; ok && at <= readAt {
			delete(s.handed, o.Market) // handed back since, without a word (store.Move, store.Assign)
		}
	}
	for id, m := range s.markets {
		if readAt > 0 && m.loadedAt > readAt {
			continue
		}
		if epoch, ok := want[id]; !ok || epoch != m.epoch {
			s.lose(id)
		}
	}
	for _, o := range owned {
		if o.Status != domain.MarketOpen {
			continue
		}
		if _, err := s.ensure(ctx, o.Market); err != nil && !errors.Is(err, exchange.ErrNotOwner) {
			s.log.Warn("could not load an assigned market", "market", o.Market, "err", err)
		}
	}
}

// Registration keeps a named shard registered: a heartbeat in Postgres every Interval, and after
// each one the set of markets it holds brought in line with those recorded as its own.
type Registration struct {
	// Address is where the front API reaches this shard's internal HTTP API.
	Address  string
	Interval time.Duration // default 1s
	// Pool is the ShardPool the process runs in (pmx shard --pool); "" is the default pool.
	Pool string
}

// Run registers the shard (store.Register) and heartbeats until ctx ends, then unregisters it so
// that its markets move at once. It returns store.ErrSuperseded, having dropped every market,
// when another process registers under the shard's name meanwhile.
func (s *Shard) Run(ctx context.Context, reg Registration) error {
	return register(ctx, s.cfg.Store, s.cfg.Name, s.log, reg, []*Shard{s})
}

// register keeps a named shard process registered until ctx ends, bringing the markets each of
// its shards holds in line with those Postgres records as the process's after every heartbeat.
func register(ctx context.Context, st Bookkeeping, name string, log *slog.Logger, reg Registration, shards []*Shard) error {
	interval := reg.Interval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var incarnation uuid.UUID // none until the first registration succeeds
	var rates orderRates
	for beats := 0; ; beats++ {
		var err error
		incarnation, err = beat(ctx, st, name, log, reg, shards, incarnation)
		if err == nil && incarnation != uuid.Nil && beats%loadEvery == 0 {
			reportLoad(ctx, st, name, log, shards, incarnation, &rates)
		}
		if errors.Is(err, store.ErrSuperseded) {
			log.Error("this process stops serving its markets", "name", name, "err", err)
			for _, s := range shards {
				if err := s.do(context.WithoutCancel(ctx), &command{kind: cmdSync}); err != nil {
					s.log.Warn("could not drop the markets", "err", err)
				}
			}
			return err
		}
		select {
		case <-ctx.Done():
			if incarnation == uuid.Nil {
				return nil
			}
			stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := st.Unregister(stopCtx, name, incarnation); err != nil {
				log.Warn("could not unregister", "err", err)
			}
			return nil
		case <-t.C:
		}
	}
}

// reportLoad records the orders per second each market took over the window (orderrate.go), for
// the operator's rebalancing. A report that fails is only logged: the operator goes on with the
// last one, and the next report comes a few heartbeats later.
func reportLoad(ctx context.Context, st Bookkeeping, name string, log *slog.Logger, shards []*Shard, incarnation uuid.UUID, rates *orderRates) {
	totals := map[uuid.UUID]int64{}
	for _, s := range shards {
		s.placed.addTo(totals)
	}
	load := rates.observe(time.Now(), totals)
	if load == nil {
		load = map[uuid.UUID]float64{} // reported, as nothing yet
	}
	if err := st.ReportLoad(ctx, name, incarnation, load); err != nil && ctx.Err() == nil {
		log.Warn("could not report the markets' load", "err", err)
	}
}

// beat registers the process in its pool (store.Register), or heartbeats once it is registered, then syncs
// its shards' markets. It returns the process's incarnation, and store.ErrSuperseded when
// another process has registered under the name.
func beat(ctx context.Context, st Bookkeeping, name string, log *slog.Logger, reg Registration, shards []*Shard, incarnation uuid.UUID) (uuid.UUID, error) {
	address := reg.Address
	if incarnation == uuid.Nil {
		id, err := st.Register(ctx, name, address, reg.Pool)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("registration failed", "err", err)
			}
			return uuid.Nil, nil
		}
		incarnation = id
		for _, s := range shards {
			s.incarnation.Store(&id)
		}
	} else if err := st.Beat(ctx, name, address, incarnation); err != nil {
		if errors.Is(err, store.ErrSuperseded) {
			return incarnation, err
		}
		if ctx.Err() == nil {
			log.Warn("heartbeat failed", "err", err)
		}
		return incarnation, nil
	}
	readAt := make([]int64, len(shards))
	for i, s := range shards {
		readAt[i] = s.loads.Load()
	}
	owned, err := st.OwnedMarkets(ctx, name)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("could not read the markets assigned here", "err", err)
		}
		return incarnation, nil
	}
	for i, s := range shards { // each loads those of them it serves (Config.owns)
		if err := s.do(ctx, &command{kind: cmdSync, owned: owned, readAt: readAt[i]}); err != nil && ctx.Err() == nil {
			s.log.Warn("could not load the markets assigned here", "err", err)
		}
	}
	return incarnation, nil
}
