package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// ensure returns a market, loading it and rebuilding its book from Postgres on first use.
func (s *Shard) ensure(ctx context.Context, id uuid.UUID) (*marketState, error) {
	if m, ok := s.markets[id]; ok {
		return m, nil
	}
	if _, ok := s.handed[id]; ok {
		return nil, exchange.ErrHandedOver
	}
	m, err := s.load(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.ErrUnknownMarket
	}
	if errors.Is(err, exchange.ErrNotOwner) {
		return nil, err
	}
	if err != nil {
		s.log.Error("could not load market", "market", id, "err", err)
		return nil, exchange.ErrUnavailable
	}
	m.loadedAt = s.loads.Add(1)
	s.markets[id] = m
	s.publish(m)
	return m, nil
}

// serves reports whether this shard, of its Set, serves the market (every market when it is not
// one of a Set's). A market the Set has not seen yet is given out here, and a market of an event
// with its event, so that an event's markets are served together: every path that takes a market
// on (a load, the dead-man switch's sweep) asks through this one.
func (s *Shard) serves(id uuid.UUID, event *uuid.UUID) bool {
	if event != nil && s.cfg.ownsEvent != nil {
		return s.cfg.ownsEvent(id, *event)
	}
	return s.cfg.owns == nil || s.cfg.owns(id)
}

func (s *Shard) load(ctx context.Context, id uuid.UUID) (*marketState, error) {
	row, err := s.cfg.Store.Market(ctx, id)
	if err != nil {
		return nil, err
	}
	if !s.serves(id, row.EventID) {
		return nil, exchange.ErrNotOwner // another shard of its Set serves it
	}
	m := &marketState{id: id, status: row.Status, epoch: row.Epoch, resting: map[int64]*apijson.Order{},
		free: map[holding]int64{}, inEvent: row.EventID != nil, event: row.EventID}
	if s.cfg.Name != "" && (row.Shard == nil || *row.Shard != s.cfg.Name) {
		return nil, exchange.ErrNotOwner
	}
	if mine := s.incarnation.Load(); mine != nil {
		// Another process registered under this name since (store.Register) owns it now.
		if current, err := s.cfg.Store.Incarnation(ctx, s.cfg.Name); err != nil {
			return nil, err
		} else if current != *mine {
			return nil, exchange.ErrNotOwner
		}
	}
	if row.LastTradePrice != nil {
		m.lastPrice = *row.LastTradePrice
	}
	if m.lastOrder, m.lastTrade, err = s.cfg.Store.Sequences(ctx, id); err != nil {
		return nil, err
	}
	if row.Status != domain.MarketOpen && row.Status != domain.MarketClosed {
		m.fedFrom(row, &s.depth)
		return m, nil
	}
	resting, err := s.cfg.Store.RestingOrders(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("while loading the orders of market %s: %w", id, err)
	}
	states := make([]engine.OrderState, len(resting))
	for i, o := range resting {
		if states[i], err = engineState(o); err != nil {
			return nil, err
		}
		if o.ExpiresAt != nil {
			m.expiries.add(*o.ExpiresAt, o.Seq)
		}
	}
	m.resting = restingOf(resting)
	for seq, o := range m.resting {
		m.rest(seq, o)
	}
	if m.book, err = engine.Rebuild(states, m.lastPrice); err != nil {
		return nil, fmt.Errorf("while rebuilding the book of market %s: %w", id, err)
	}
	holdings, err := s.cfg.Store.Holdings(ctx, id)
	if err != nil {
		return nil, err
	}
	m.exposure = exposureOf(holdings, states)
	m.fedFrom(row, &s.depth)
	s.log.Info("loaded market", "market", id, "status", m.status, "resting", len(resting))
	return m, nil
}

// engineState converts a stored resting order to the engine's terms.
func engineState(o records.Order) (engine.OrderState, error) {
	side, ok1 := engine.ParseSide(o.Side)
	outcome, ok2 := engine.ParseOutcome(o.Outcome)
	tif, ok3 := engine.ParseTimeInForce(cmp.Or(o.TimeInForce, "GTC"))
	selfTrade, ok4 := engine.ParseSelfTrade(cmp.Or(o.SelfTrade, "CANCEL_RESTING"))
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return engine.OrderState{}, fmt.Errorf("order %s has side %q, outcome %q, time in force %q, self-trade mode %q",
			o.ID, o.Side, o.Outcome, o.TimeInForce, o.SelfTrade)
	}
	return engine.OrderState{
		Order: engine.Order{ID: engine.OrderID(o.Seq), Account: engine.AccountID(o.AccountID), Side: side,
			Outcome: outcome, Price: o.Price, Quantity: o.Quantity, TimeInForce: tif, PostOnly: o.PostOnly, SelfTrade: selfTrade,
			Fees: o.Fees},
		Filled: o.FilledQuantity,
		Status: o.Status,
	}, nil
}

// drop forgets a market the shard no longer owns.
func (s *Shard) drop(id uuid.UUID) {
	if _, ok := s.markets[id]; ok {
		s.log.Info("market no longer owned here; dropped", "market", id)
	}
	delete(s.markets, id)
	s.snaps.Delete(id)
}

// publish makes a market's committed book visible to readers.
func (s *Shard) publish(m *marketState) { s.snaps.Store(m.id, s.snapshotOf(m)) }

// pendingSnapshot is a book as a batch leaves it, to publish once the batch commits.
type pendingSnapshot struct {
	market uuid.UUID
	snap   *exchange.Snapshot
}

// snapshotOf takes a snapshot of a market's book as it stands in memory.
func (s *Shard) snapshotOf(m *marketState) *exchange.Snapshot {
	snap := &exchange.Snapshot{Status: m.status, Epoch: m.epoch, Seq: m.eventSeq}
	if m.book != nil {
		m.book.Depth(engine.Payout, &snap.Depth)
	} else if m.lastPrice != 0 {
		snap.Depth.Yes.LastTradePrice = m.lastPrice
		snap.Depth.No.LastTradePrice = engine.Payout - m.lastPrice
	}
	return snap
}

// OrderBook returns a market's committed book, loading the market on first use.
func (s *Shard) OrderBook(ctx context.Context, id uuid.UUID) (*exchange.Snapshot, error) {
	if snap, ok := s.snapshot(id); ok {
		return snap, nil
	}
	if err := s.do(ctx, &command{kind: cmdLoad, market: id}); err != nil {
		return nil, err
	}
	snap, ok := s.snapshot(id)
	if !ok {
		return nil, exchange.ErrUnavailable
	}
	return snap, nil
}
