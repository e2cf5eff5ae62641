package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/store"
)

// The planned handoff (docs/architecture.md §6): the operator has a named shard hand markets to
// another. The handoff is a command of the batch loop that runs in a turn of its own: every
// command taken before it runs and commits first (a batch in flight lands, the commands before it
// in its own take run as a batch), then the markets move in Postgres (store.HandOver, under the
// epochs the shard holds them with) and are dropped, and only then do the commands taken after it
// run — those for the markets refused with exchange.ErrHandedOver, nothing done, which the front
// sends on to the new owner. So no write of the old owner lands after the move, and none is lost
// or refused for the move alone; fencing (store.Batch.Fence) stays the safety net.

// HandOff hands markets this shard owns to the shard named to (exchange.Handoff).
func (s *Shard) HandOff(ctx context.Context, markets []uuid.UUID, to string) ([]int64, error) {
	c := &command{kind: cmdHandoff, markets: markets, to: to}
	if err := s.do(ctx, c); err != nil {
		return nil, err
	}
	return c.epochs, nil
}

// TakeOver loads markets handed to this shard (exchange.Handoff).
func (s *Shard) TakeOver(ctx context.Context, markets []uuid.UUID, epochs []int64) error {
	if len(markets) != len(epochs) {
		return fmt.Errorf("%d markets taken over with %d epochs", len(markets), len(epochs))
	}
	return s.do(ctx, &command{kind: cmdTakeOver, markets: markets, epochs: epochs})
}

func handingOff(c *command) bool { return c.kind == cmdHandoff }

// launchAround launches a batch taken with a handoff at cmds[i], the batch in flight (if any)
// having landed: the commands before the handoff run to their end, then the handoff, then the
// commands after it are launched. It returns the batch then in flight, if any.
func (s *Shard) launchAround(cmds []*command, i int) *flight {
	if i > 0 {
		s.runNow(batch{cmds: slices.Clip(cmds[:i])}, 0, nil)
	}
	c := cmds[i]
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	c.err = s.handOver(ctx, c)
	cancel()
	c.reply <- c.err
	if rest := cmds[i+1:]; len(rest) > 0 {
		return s.launch(batch{cmds: rest})
	}
	return nil
}

// handOver moves the markets of a handoff in Postgres and drops them. Every market must be one the
// shard owns, OPEN, under the epoch it holds it with; if not, none moves. The target must be a live
// shard, and an event's markets go all together or not at all (store.HandOver refuses either). A market held under an
// epoch that is no longer the shard's (a move it missed, and came back since) is loaded afresh,
// and the handoff tried once more.
func (s *Shard) handOver(ctx context.Context, c *command) error {
	if s.cfg.Name == "" {
		// A standalone shard serves every market of its database: there is no other to hand to.
		return fmt.Errorf("only a named shard hands markets over: %w", exchange.ErrNotOwner)
	}
	for attempt := 0; ; attempt++ {
		epochs := make([]int64, len(c.markets))
		for i, id := range c.markets {
			m, err := s.ensure(ctx, id)
			if err != nil {
				return err
			}
			if m.status != domain.MarketOpen {
				return fmt.Errorf("market %s is %s, and only an OPEN market is handed over: %w", id, m.status, exchange.ErrNotOwner)
			}
			epochs[i] = m.epoch
		}
		moved, err := s.cfg.Store.HandOver(ctx, c.markets, epochs, s.cfg.Name, c.to)
		if errors.Is(err, store.ErrTargetNotLive) || errors.Is(err, store.ErrSplitsEvent) {
			// Refused with nothing moved: the markets stay this shard's, as it holds them.
			return err
		}
		if err != nil || !moved {
			// Postgres no longer records one of them as this shard's under the epoch it holds, or
			// the move's commit may have landed unanswered: drop them all, so that their next use
			// reads who owns them.
			for _, id := range c.markets {
				s.drop(id)
			}
		}
		switch {
		case err != nil:
			s.log.Error("could not hand markets over", "markets", c.markets, "to", c.to, "err", err)
			return exchange.ErrUnavailable
		case !moved && attempt == 0:
			continue
		case !moved:
			return exchange.ErrNotOwner
		}
		if s.handed == nil {
			s.handed = map[uuid.UUID]int64{}
		}
		c.epochs = make([]int64, len(epochs))
		for i, id := range c.markets {
			s.drop(id)
			s.handed[id] = s.loads.Add(1)
			s.metrics.handedOver.Inc()
			c.epochs[i] = epochs[i] + 1
		}
		s.log.Info("handed markets over", "markets", c.markets, "to", c.to)
		return nil
	}
}

// takeOver readies markets handed to this shard: each is loaded under the epoch Postgres records,
// a copy held under an earlier one dropped first. One that is not this shard's (it moved on
// meanwhile) is left alone, and so is one that cannot be loaded now: its first use loads it.
func (s *Shard) takeOver(ctx context.Context, c *command) {
	for i, id := range c.markets {
		delete(s.handed, id)
		if m, ok := s.markets[id]; ok && m.epoch < c.epochs[i] {
			s.drop(id)
		}
		if _, err := s.ensure(ctx, id); err != nil && !errors.Is(err, exchange.ErrNotOwner) && !errors.Is(err, domain.ErrUnknownMarket) {
			s.log.Warn("could not load a market handed here; its first use will", "market", id, "err", err)
		}
	}
}

// HandOff hands markets to the shard named to (exchange.Handoff) from the one shard of the set
// that serves them all — one market, or an event's markets, which the set serves together.
func (set *Set) HandOff(ctx context.Context, markets []uuid.UUID, to string) ([]int64, error) {
	slot := -1
	for _, id := range markets {
		i, err := set.of(ctx, id)
		if err != nil {
			return nil, err
		}
		if slot >= 0 && i != slot {
			return nil, fmt.Errorf("the markets handed over are served by two shards of this process: %w", exchange.ErrUnavailable)
		}
		slot = i
	}
	if slot < 0 {
		return nil, nil
	}
	return set.shards[slot].HandOff(ctx, markets, to)
}

// TakeOver has each shard of the set load the markets handed to it (exchange.Handoff).
func (set *Set) TakeOver(ctx context.Context, markets []uuid.UUID, epochs []int64) error {
	if len(markets) != len(epochs) {
		return fmt.Errorf("%d markets taken over with %d epochs", len(markets), len(epochs))
	}
	var errs []error
	groups := set.split(ctx, len(markets), func(i int) uuid.UUID { return markets[i] }, func(int, error) {})
	for slot, idx := range groups {
		ms, es := make([]uuid.UUID, len(idx)), make([]int64, len(idx))
		for j, i := range idx {
			ms[j], es[j] = markets[i], epochs[i]
		}
		errs = append(errs, set.shards[slot].TakeOver(ctx, ms, es))
	}
	return errors.Join(errs...)
}
