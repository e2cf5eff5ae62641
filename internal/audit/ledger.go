package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/event"
)

// ledger is what the replay derives of the accounts (docs/architecture.md §3): the shares each
// holds per market and outcome, moved by the engine's fills and the conversions, and the cash each
// gained or spent since its grant, by fills, conversions and settlements.
type ledger struct {
	shares  map[holding]int64
	cash    map[int64]int64
	locked  map[int64]int64 // what the replay's open BUY orders lock
	events  map[uuid.UUID]*eventRow
	partial bool           // a market was not replayed
	unknown map[int64]bool // the accounts with orders (or, the exchange's, fees) in a market not replayed: their cash cannot be derived
}

type holding struct {
	market  uuid.UUID
	account int64
	outcome engine.Outcome
}

type eventRow struct {
	keys    []string
	markets []uuid.UUID // by outcome, in the event's order
	status  string
	totals  event.Totals // shares outstanding before settlement, from the replay
}

func newLedger() ledger {
	return ledger{shares: map[holding]int64{}, cash: map[int64]int64{}, locked: map[int64]int64{}, events: map[uuid.UUID]*eventRow{},
		unknown: map[int64]bool{}}
}

// leg books one side of a fill: the engine says what it does to the account's cash and shares.
func (l *ledger) leg(m uuid.UUID, g *engine.Leg) {
	l.shares[holding{m, int64(g.Account), g.Outcome}] += g.Shares
	l.cash[int64(g.Account)] += g.Cash + g.CashLocked
}

// readEvents reads the audited markets' events and their conversions, and books each conversion
// by the event's rule (package event), checking the cash it paid.
func (a *auditor) readEvents(ctx context.Context, markets []market) error {
	var ids []uuid.UUID
	for _, m := range markets {
		if m.event != uuid.Nil && !slices.Contains(ids, m.event) {
			ids = append(ids, m.event)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := a.tx.Query(ctx, `select id, status, outcomes from events where id = any ($1)`, ids)
	if err != nil {
		return fmt.Errorf("audit: reading the events: %w", err)
	}
	for rows.Next() {
		var id uuid.UUID
		var e eventRow
		var outcomes []byte
		if err := rows.Scan(&id, &e.status, &outcomes); err != nil {
			return fmt.Errorf("audit: reading the events: %w", err)
		}
		var os []struct{ Key string }
		if err := json.Unmarshal(outcomes, &os); err != nil {
			return fmt.Errorf("audit: reading the outcomes of event %s: %w", id, err)
		}
		for _, o := range os {
			e.keys = append(e.keys, o.Key)
		}
		e.markets = make([]uuid.UUID, len(e.keys))
		e.totals = event.Totals{YES: make([]int64, len(e.keys)), NO: make([]int64, len(e.keys))}
		a.ledger.events[id] = &e
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: reading the events: %w", err)
	}
	keyRows, err := a.tx.Query(ctx, `select event_id, outcome_key, id from markets where event_id = any ($1)`, ids)
	if err != nil {
		return fmt.Errorf("audit: reading the events' markets: %w", err)
	}
	for keyRows.Next() {
		var e, m uuid.UUID
		var key string
		if err := keyRows.Scan(&e, &key, &m); err != nil {
			return fmt.Errorf("audit: reading the events' markets: %w", err)
		}
		if ev := a.ledger.events[e]; ev != nil {
			if i := slices.Index(ev.keys, key); i >= 0 {
				ev.markets[i] = m
			}
		}
	}
	if err := keyRows.Err(); err != nil {
		return fmt.Errorf("audit: reading the events' markets: %w", err)
	}
	conv, err := a.tx.Query(ctx, `select id, event_id, account_id, outcomes, quantity, cash from conversions
		where event_id = any ($1) order by created_at, id`, ids)
	if err != nil {
		return fmt.Errorf("audit: reading the conversions: %w", err)
	}
	defer conv.Close()
	for conv.Next() {
		var id, e uuid.UUID
		var account, quantity, cash int64
		var listed []string
		if err := conv.Scan(&id, &e, &account, &listed, &quantity, &cash); err != nil {
			return fmt.Errorf("audit: reading the conversions: %w", err)
		}
		a.r.Conversions++
		ev := a.ledger.events[e]
		look := fmt.Sprintf("conversions row %s", id)
		c, err := event.ParseConversion(ev.keys, listed, quantity)
		if err != nil {
			a.differ("conversion", uuid.Nil, look, "conversion %s of event %s is not one the event's rules allow: %v", id, e, err)
			continue
		}
		eff := c.Effect(len(ev.keys))
		if eff.Cash != cash {
			a.differ("conversion", uuid.Nil, look, "conversion %s paid %d cents in Postgres; the event's rule pays %d", id, cash, eff.Cash)
		}
		a.ledger.cash[account] += eff.Cash
		for i, m := range ev.markets {
			a.ledger.shares[holding{m, account, engine.Yes}] += eff.YES[i]
			a.ledger.shares[holding{m, account, engine.No}] += eff.NO[i]
		}
	}
	return conv.Err()
}

// compareHoldings compares a replayed market's positions and settlements with Postgres, and books
// the settlement's payouts.
func (r *replay) compareHoldings(ctx context.Context) error {
	l := &r.a.ledger
	held, err := r.a.readPositions(ctx, r.m.id)
	if err != nil {
		return err
	}
	locked := map[position]int64{}
	for _, o := range r.book.Resting(nil) {
		cash, shares := o.Lock()
		if shares > 0 {
			locked[position{int64(o.Account), o.Outcome}] += shares
		}
		l.locked[int64(o.Account)] += cash
	}
	derived := map[position]int64{}
	for h, q := range l.shares {
		if h.market == r.m.id && q != 0 {
			derived[position{h.account, h.outcome}] = q
		}
	}
	var ev *eventRow
	index := -1
	if r.m.event != uuid.Nil {
		if ev = l.events[r.m.event]; ev != nil {
			index = slices.Index(ev.markets, r.m.id)
		}
	}
	if ev != nil && index >= 0 {
		for p, q := range derived {
			if p.outcome == engine.Yes {
				ev.totals.YES[index] += q
			} else {
				ev.totals.NO[index] += q
			}
		}
	}
	if r.m.settled {
		settled, err := r.a.readSettlements(ctx, r.m.id)
		if err != nil {
			return err
		}
		yes, no := event.VoidPayout(2)
		if ev != nil {
			yes, no = event.VoidPayout(len(ev.keys))
		}
		for p, q := range derived {
			pay := int64(0)
			switch {
			case r.m.status == "CANCELED" && p.outcome == engine.Yes:
				pay = yes
			case r.m.status == "CANCELED":
				pay = no
			case p.outcome.String() == r.m.outcome:
				pay = engine.Payout
			}
			r.a.r.Settlements++
			got, ok := settled[p]
			if !ok || got[0] != q || got[1] != q*pay {
				r.a.differ("settlement", r.m.id, fmt.Sprintf("settlements row (market_id, account_id, outcome) = (%s, %d, %s)", r.m.id, p.account, p.outcome),
					"account %d held %d %s when the market settled (%s %s), paid %d; Postgres holds %d paid %d (absent: %t)",
					p.account, q, p.outcome, r.m.status, r.m.outcome, q*pay, got[0], got[1], !ok)
			}
			l.cash[p.account] += q * pay
			delete(settled, p)
		}
		for p, got := range settled {
			if got[0] != 0 || got[1] != 0 {
				r.a.differ("settlement", r.m.id, fmt.Sprintf("settlements row (market_id, account_id, outcome) = (%s, %d, %s)", r.m.id, p.account, p.outcome),
					"Postgres paid account %d %d cents for %d %s, which the replay says it did not hold", p.account, got[1], got[0], p.outcome)
			}
		}
		clear(derived)
	}
	for p, q := range derived {
		got := held[p]
		if got[0] != q || got[1] != locked[p] {
			r.a.differ("position", r.m.id, fmt.Sprintf("positions row (account_id, market_id, outcome) = (%d, %s, %s)", p.account, r.m.id, p.outcome),
				"account %d holds %d %s (%d locked) in Postgres; the replay derives %d (%d locked by its open SELL orders)",
				p.account, got[0], p.outcome, got[1], q, locked[p])
		}
		delete(held, p)
	}
	for p, got := range held {
		if got[0] != 0 || got[1] != 0 {
			r.a.differ("position", r.m.id, fmt.Sprintf("positions row (account_id, market_id, outcome) = (%d, %s, %s)", p.account, r.m.id, p.outcome),
				"account %d holds %d %s (%d locked) in Postgres; the replay derives none", p.account, got[0], p.outcome, got[1])
		}
	}
	return nil
}

// events checks what a voided event kept of its collateral (exchange_remainders), from the
// shares the replay derived.
func (a *auditor) events(ctx context.Context) error {
	for id, ev := range a.ledger.events {
		if ev.status != "CANCELED" || a.ledger.partial {
			continue
		}
		_, want, err := ev.totals.Void()
		if err != nil {
			a.differ("event", uuid.Nil, fmt.Sprintf("the positions and conversions of event %s", id), "event %s: %v", id, err)
			continue
		}
		var got int64
		if err := a.tx.QueryRow(ctx, `select coalesce((select amount from exchange_remainders where event_id = $1), 0)`, id).Scan(&got); err != nil {
			return fmt.Errorf("audit: reading the remainder of event %s: %w", id, err)
		}
		if got != want {
			a.differ("event", uuid.Nil, fmt.Sprintf("exchange_remainders row %s", id),
				"voiding event %s left %d cents on the exchange's account in Postgres; the replay derives %d", id, got, want)
		}
	}
	return nil
}

// accounts compares each account's cash with what the ledger derives: its total (available +
// locked) with its grant and every flow since, and its locked cash with its open BUY orders.
func (a *auditor) accounts(ctx context.Context) error {
	stored, granted, err := storedCash(ctx, a.tx)
	if err != nil {
		return err
	}
	if n := len(a.ledger.unknown); n > 0 {
		a.r.CannotCheck = append(a.r.CannotCheck, fmt.Sprintf("the cash of %d accounts with orders or fees in a market not replayed (above)", n))
	}
	for id, c := range stored {
		if a.ledger.unknown[id] {
			continue
		}
		a.r.Accounts++
		look := fmt.Sprintf("accounts row %d (available, locked), its trades, settlements and conversions", id)
		if want := granted[id] + a.ledger.cash[id]; c[0]+c[1] != want {
			a.differ("cash", uuid.Nil, look, "account %d holds %d cents in Postgres (%d available + %d locked); its grant and every flow since make %d",
				id, c[0]+c[1], c[0], c[1], want)
		}
		if c[1] != a.ledger.locked[id] {
			a.differ("locked", uuid.Nil, fmt.Sprintf("accounts row %d (locked) and its open BUY orders", id),
				"account %d has %d cents locked in Postgres; the replay's open BUY orders lock %d", id, c[1], a.ledger.locked[id])
		}
	}
	for id := range a.ledger.cash {
		if _, ok := stored[id]; !ok && !a.ledger.unknown[id] {
			a.differ("cash", uuid.Nil, fmt.Sprintf("accounts row %d", id), "account %d trades in the log but has no row", id)
		}
	}
	return nil
}
