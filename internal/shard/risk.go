package shard

import (
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/store"
)

// Self-set risk limits (docs/architecture.md §3, "Risk limits"). An account may cap
//
//   - its position per market: for each outcome of a market, the shares it holds plus the remaining
//     quantity of its open BUY orders of that outcome — its position if every open order filled
//     (SELL orders only ever lower it) — may not pass maxPosition. YES and NO count separately.
//   - the cash its open orders lock, across all markets: maxLockedCash.
//
// Only an order that adds to one of them is checked: a BUY by its whole quantity and lock (also
// IOC and FOK, which could fill all of it), an amend of a BUY by what it adds to its remaining
// quantity and its lock. SELLs, cancels and amends that add nothing always pass, so a limit set
// below what is used refuses only orders that add to it.
//
// The shard decides the refusals. Exposure (held + open BUY remaining, per account and outcome) of
// every market it holds is exact in memory: only the market's shard changes its holdings and
// orders. The limits are the account's, which the API changes. The locked cash is spread over
// every shard's markets, so no shard knows it: under a maxLockedCash each shard locks only within
// the room its allocation holds (docs/architecture.md §11), acquired like cash, and the room of
// every holder plus what the account's orders lock never passes the limit. Room and limits come
// with the allocation's cash, read at the start of a batch or from the views (views.go), and are
// held at commit by the database (migration 032): a batch decided by limits since changed fails,
// and room cannot go below zero. As with funds, a refusal from the views is only a doubt, and the
// batch runs again, acquiring room and reading.

// expose adds delta to an account's exposure to an outcome of a market.
func (s *Shard) expose(market uuid.UUID, account int64, outcome engine.Outcome, delta int64) {
	m := s.markets[market]
	if m == nil || m.exposure == nil || delta == 0 {
		return
	}
	k := holding{account, outcome}
	if v := m.exposure[k] + delta; v != 0 {
		m.exposure[k] = v
	} else {
		delete(m.exposure, k)
	}
}

// exposed is an account's exposure to an outcome of a market: its position if every open BUY
// order of that outcome filled.
func (m *marketState) exposed(account int64, outcome engine.Outcome) int64 {
	return m.exposure[holding{account, outcome}]
}

// exposureOf builds a market's exposures from its holdings and resting orders, as loaded.
func exposureOf(holdings []store.Holding, resting []engine.OrderState) map[holding]int64 {
	e := make(map[holding]int64, len(holdings))
	for _, h := range holdings {
		e[holding{h.Account, h.Outcome}] += h.Quantity
	}
	for i := range resting {
		if o := &resting[i]; o.Side == engine.Buy {
			e[holding{int64(o.Account), o.Outcome}] += o.Remaining()
		}
	}
	return e
}

// checkRisk refuses an order of account that would add shares to a position-if-filled now at
// position, or cash to what its orders lock, past a limit; an order it lets through records the
// version of the limits it was decided by, which the commit checks.
func (a *accumulator) checkRisk(account int64, outcome engine.Outcome, position, shares, cash int64) error {
	r, ok := a.risk[account]
	if !ok {
		return nil // an account the batch did not read has no cash to reserve either
	}
	if shares > 0 && r.MaxPosition != store.NoLimit && position+shares > r.MaxPosition {
		return a.short(domain.PositionLimitExceeded(r.MaxPosition, position, shares, outcome.String()))
	}
	if cash > 0 && r.MaxLockedCash != store.NoLimit && cash > r.Room {
		// After an acquire, the room is all the limit leaves: what the account's orders lock is
		// the limit less it (the room of other holders is theirs to use, and was taken first).
		return a.shortOf(account, exhaustedRoom, domain.LockedCashLimitExceeded(r.MaxLockedCash, max(r.MaxLockedCash-r.Room, 0), cash))
	}
	if shares > 0 || cash > 0 {
		d := a.cashDelta(account)
		d.RiskDecided, d.RiskVersion = true, r.Version
	}
	return nil
}

// riskRefuses reports whether the views show a placement of cmds that one of its account's limits
// would refuse. A refusal is never answered from the views, so such a batch reads at once rather
// than running from the views only to be doubted: a bot placing at its limit costs one round trip
// a refusal, not two. A guess (it leaves out what the batch itself adds), like needs.
func (s *Shard) riskRefuses(cmds []*command) bool {
	for _, c := range cmds {
		if c.err != nil || c.kind != cmdPlace || c.place.Side != engine.Buy {
			continue
		}
		p := &c.place
		r, ok := s.risk[p.Account]
		m := s.markets[p.Market]
		if !ok || m == nil {
			continue
		}
		if r.MaxPosition != store.NoLimit && m.exposed(p.Account, p.Outcome)+p.Quantity > r.MaxPosition ||
			r.MaxLockedCash != store.NoLimit && int64(p.Price)*p.Quantity > r.Room {
			return true
		}
	}
	return false
}
