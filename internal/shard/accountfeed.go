package shard

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// The account feeds (package feed): as a batch's commands run, each change to an order gets an
// event in its account's feed, in the order the changes happen: accepted, amended, each fill, and
// cancelled. Every event carries the order's whole state after it, as GET /orders would show it:
// the shard keeps that state for every resting order of its markets (marketState.resting, loaded
// with the book), the base of the events of orders that rest. Before the batch commits, each
// account's events become one JSON array on its cash delta (encoded on the commit's goroutine, off
// the loop: encodeAccountEvents); the batch's accounts' statement numbers them in the account's
// stream from this shard, on its allocation of the account (store.CommitBatch, docs/architecture.md
// §11), and the shard hands them, numbered, to the feed's followers once the batch has committed.
// Settlements are numbered by Postgres's settle_holder() and encoded by settledEvents.

// epochsOf is the ownership epoch the shard holds each market of an account's events with, which
// the hub tells a market that stayed from one that moved away and back by (feed.Batch.Epochs): on
// the loop, as the batch is published. A market it no longer holds, a settlement's (whose events
// are not in the accumulator's) and a conversion's event are left out, which the hub reads as
// moved: a read of Postgres, correct either way.
func (s *Shard) epochsOf(events []feed.AccountEvent) map[uuid.UUID]int64 {
	out := make(map[uuid.UUID]int64, 1)
	for i := range events {
		if m, ok := s.markets[events[i].Market()]; ok {
			out[m.id] = m.epoch
		}
	}
	return out
}

// accountEvent records an event in an account's feed.
func (s *Shard) accountEvent(account int64, e feed.AccountEvent) {
	if s.cfg.NoEventLog {
		return
	}
	e.At = s.acc.batch.Now
	s.acc.accountEvents[account] = append(s.acc.accountEvents[account], e)
}

// orderEvent records an event of an order, with a copy of its state.
func (s *Shard) orderEvent(account int64, typ string, o apijson.Order) {
	s.accountEvent(account, feed.AccountEvent{Type: typ, Order: &o})
}

// fillEvent records a fill of an order whose state after the fill is o.
func (s *Shard) fillEvent(account int64, o *apijson.Order, l *engine.Leg, t *records.Trade, role string) {
	s.accountEvent(account, feed.AccountEvent{Type: feed.AccountFill, FilledQuantity: o.FilledQuantity, Status: o.Status, Fill: &apijson.Fill{
		ID: apijson.FillID(t.ID, role), TradeID: t.ID, OrderID: o.ID, ClientOrderID: o.ClientOrderID, MarketID: o.MarketID,
		Side: o.Side, Outcome: o.Outcome, Price: l.Price, Quantity: t.Quantity, Role: role, CreatedAt: t.CreatedAt, Fee: l.Fee}})
}

// restingOrder returns the state of a resting order of a market as its last event left it.
func (s *Shard) restingOrder(m *marketState, id engine.OrderID) (*apijson.Order, bool) {
	o, ok := m.resting[int64(id)]
	if !ok {
		s.log.Error("an order left its book that the shard did not know to rest there; its account's feed lacks its state",
			"market", m.id, "seq", id)
	}
	return o, ok
}

// makerFilled records a fill of a resting order, which leaves the book if it is filled.
func (s *Shard) makerFilled(m *marketState, l *engine.Leg, t *records.Trade) {
	o, ok := s.restingOrder(m, l.Order)
	if !ok {
		return
	}
	o.FilledQuantity, o.Status, o.UpdatedAt = l.Filled, l.Status.String(), t.CreatedAt
	s.fillEvent(int64(l.Account), o, l, t, "MAKER")
	if !l.Status.Resting() {
		m.unrest(int64(l.Order))
	}
}

// release takes a resting order out of its account's reservations and records it cancelled for
// reason: accumulator.release, and its event.
func (s *Shard) release(m *marketState, st *engine.OrderState, reason engine.CancelReason) {
	s.acc.release(m.id, st, reason)
	o, ok := s.restingOrder(m, st.ID)
	if !ok {
		return
	}
	m.unrest(int64(st.ID))
	o.FilledQuantity, o.Status, o.CancelReason, o.UpdatedAt = st.Filled, st.Status.String(), reasonText(reason), s.acc.batch.Now
	s.orderEvent(int64(st.Account), feed.AccountCancelled, *o)
}

// restOrLeave ends the events of an order that took liquidity (a placement, or an amend that
// crossed): final is its state after the command. A resting order is kept as the base of its next
// events; one cancelled in the command (what an IOC or FOK left, a self-trade) gets its event.
func (s *Shard) restOrLeave(m *marketState, seq, account int64, final apijson.Order, status engine.Status) {
	if status.Resting() {
		m.resting[seq] = &final
		m.rest(seq, &final)
		return
	}
	m.unrest(seq)
	if status != engine.StatusFilled {
		s.orderEvent(account, feed.AccountCancelled, final)
	}
}

// recordAccountEvents counts each account's events on its cash delta, for the batch's accounts'
// statement to number. Under the loop, after the commands ran; the events are encoded by
// encodeAccountEvents, on the batch's commit goroutine, off the loop.
func (s *Shard) recordAccountEvents() {
	for account, events := range s.acc.accountEvents { // the deltas are sorted by account later (finish)
		s.acc.cashDelta(account).EventCount = int64(len(events))
	}
}

// encodeAccountEvents puts each account's events, as one JSON array, on its cash delta. It runs on
// the goroutine that commits the batch (send), just before the commit: the loop meanwhile builds
// the next batch in the other accumulator, and touches neither a's events nor its deltas until the
// commit has an answer. So the encoding, about 4% of pmx's CPU under closed loop, no longer holds
// up the loop that every command of the next batch waits on. A failure fails the batch before
// anything reaches Postgres, as one under the loop did.
func encodeAccountEvents(a *accumulator) error {
	for i := range a.batch.Cash {
		d := &a.batch.Cash[i]
		if d.EventCount == 0 {
			continue
		}
		raw, err := feed.EncodeAccount(a.accountEvents[d.Account])
		if err != nil {
			return fmt.Errorf("while encoding the events of account %d: %w", d.Account, err)
		}
		d.Events = raw
	}
	return nil
}

// settledEvents encodes the events of the holdings a settlement paid an account
// (store.Batch.SettledEvents).
func settledEvents(account int64, holdings []store.SettledHolding) ([]byte, error) {
	events := make([]feed.AccountEvent, len(holdings))
	for i, h := range holdings {
		events[i] = feed.AccountEvent{Type: feed.AccountSettled, Settlement: &apijson.Settlement{MarketID: h.Market,
			MarketStatus: h.Status, Outcome: h.Outcome, Quantity: h.Quantity, Payout: h.Payout, SettledAt: h.SettledAt}, At: h.SettledAt}
	}
	return feed.EncodeAccount(events)
}

// restingOf is the public state of a market's resting orders, loaded with its book.
func restingOf(rows []records.Order) map[int64]*apijson.Order {
	out := make(map[int64]*apijson.Order, len(rows))
	for i := range rows {
		o := apijson.OrderOf(&rows[i])
		out[rows[i].Seq] = &o
	}
	return out
}
