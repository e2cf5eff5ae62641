package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/feed"
)

// market is a market's row.
type market struct {
	id        uuid.UUID
	status    string
	outcome   string // RESOLVED: YES or NO
	event     uuid.UUID
	key       string // its outcome's key in its event
	lastTrade int
	settled   bool
}

// readMarkets reads the markets the options select, oldest first.
func (a *auditor) readMarkets(ctx context.Context) ([]market, error) {
	var since, until *time.Time
	if !a.opts.Since.IsZero() {
		since = &a.opts.Since
	}
	if !a.opts.Until.IsZero() {
		until = &a.opts.Until
	}
	names := append([]string{}, a.opts.Markets...) // never nil, which pgx would send as null
	rows, err := a.tx.Query(ctx, `select m.id, m.status, coalesce(m.outcome, ''), m.event_id, coalesce(m.outcome_key, ''),
		coalesce(m.last_trade_price, 0), m.settled_at is not null
		from markets m left join events e on e.id = m.event_id
		where (cardinality($1::text[]) = 0 or m.id::text = any ($1) or m.name = any ($1))
		  and ($2 = '' or e.id::text = $2 or e.name = $2)
		  and ($3::timestamptz is null or m.updated_at >= $3)
		  and ($4::timestamptz is null or m.created_at < $4)
		order by m.created_at, m.id`, names, a.opts.Event, since, until)
	if err != nil {
		return nil, fmt.Errorf("audit: reading the markets: %w", err)
	}
	var ms []market
	for rows.Next() {
		var m market
		var event *uuid.UUID
		if err := rows.Scan(&m.id, &m.status, &m.outcome, &event, &m.key, &m.lastTrade, &m.settled); err != nil {
			return nil, fmt.Errorf("audit: reading the markets: %w", err)
		}
		if event != nil {
			m.event = *event
		}
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: reading the markets: %w", err)
	}
	if len(ms) == 0 && (len(a.opts.Markets) > 0 || a.opts.Event != "") {
		return nil, fmt.Errorf("audit: no market matches --market %v --event %q: give markets' ids or names, or an event's", a.opts.Markets, a.opts.Event)
	}
	return ms, nil
}

// order is an order's row and what the replay made of it.
type order struct {
	id       uuid.UUID
	seq      int64
	account  int64
	side     engine.Side
	outcome  engine.Outcome
	price    int
	quantity int64
	filled   int64
	status   engine.Status
	tif      engine.TimeInForce
	postOnly bool
	stp      engine.SelfTrade
	reason   string
	priority int64 // 0: never moved by an amend
	created  time.Time
	updated  time.Time
	expires  time.Time // GTD
	fees     engine.Fees

	// the replay's
	state engine.OrderState
	terms engine.Order
}

// amend is one amend of an order, from its account's feed: its new price and quantity, how much had
// filled, when, and the number of the order sequence it took if it moved the order and its event
// tells it (feed.Terms.Priority; 0: not told, in a feed written before the shards told it).
type amend struct {
	price    int
	quantity int64
	filled   int64
	at       time.Time
	priority int64
}

// history is an order's terms when accepted and its amends, from its account's feed or, once that
// is pruned, from order_terms (migration 037), which the pruning copies them into.
type history struct {
	accepted bool
	price    int
	quantity int64
	amends   []amend
	archived bool // some of it is from order_terms
	events   []feed.Terms
}

// readOrders reads a market's orders by seq.
func (a *auditor) readOrders(ctx context.Context, m uuid.UUID) ([]order, error) {
	rows, err := a.tx.Query(ctx, `select id, seq, account_id, side, outcome, price, quantity, filled_quantity, status,
		time_in_force, post_only, self_trade, coalesce(cancel_reason, ''), coalesce(priority, 0), created_at, updated_at,
		coalesce(expires_at, 'epoch'::timestamptz), taker_fee_bps, maker_fee_bps
		from orders where market_id = $1 order by seq`, m)
	if err != nil {
		return nil, fmt.Errorf("audit: reading the orders of market %s: %w", m, err)
	}
	defer rows.Close()
	var os []order
	var side, outcome, status, tif, stp string
	var takerFee, makerFee int16
	for rows.Next() {
		var o order
		if err := rows.Scan(&o.id, &o.seq, &o.account, &side, &outcome, &o.price, &o.quantity, &o.filled, &status,
			&tif, &o.postOnly, &stp, &o.reason, &o.priority, &o.created, &o.updated, &o.expires, &takerFee, &makerFee); err != nil {
			return nil, fmt.Errorf("audit: reading the orders of market %s: %w", m, err)
		}
		o.fees = engine.Fees{Taker: int(takerFee), Maker: int(makerFee)}
		o.side, _ = engine.ParseSide(side)
		o.outcome, _ = engine.ParseOutcome(outcome)
		o.status, _ = engine.ParseStatus(status)
		o.tif, _ = engine.ParseTimeInForce(tif)
		o.stp, _ = engine.ParseSelfTrade(stp)
		os = append(os, o)
	}
	return os, rows.Err()
}

// trade is a trade's row.
type trade struct {
	seq          int64
	id           uuid.UUID
	kind         string
	yesPrice     int
	quantity     int64
	takerSeq     int64
	makerSeq     int64
	takerAccount int64
	makerAccount int64
	takerFee     int64
	makerFee     int64
}

func (a *auditor) readTrades(ctx context.Context, m uuid.UUID) ([]trade, error) {
	rows, err := a.tx.Query(ctx, `select seq, id, kind, yes_price, quantity, taker_order_seq, maker_order_seq,
		taker_account_id, maker_account_id, taker_fee, maker_fee from trades where market_id = $1 order by seq`, m)
	if err != nil {
		return nil, fmt.Errorf("audit: reading the trades of market %s: %w", m, err)
	}
	defer rows.Close()
	var ts []trade
	for rows.Next() {
		var t trade
		if err := rows.Scan(&t.seq, &t.id, &t.kind, &t.yesPrice, &t.quantity, &t.takerSeq, &t.makerSeq,
			&t.takerAccount, &t.makerAccount, &t.takerFee, &t.makerFee); err != nil {
			return nil, fmt.Errorf("audit: reading the trades of market %s: %w", m, err)
		}
		ts = append(ts, t)
	}
	return ts, rows.Err()
}

// readMoves reads the history of every order an amend moved (its priority is set), in the markets
// audited: its terms when accepted and every amend, from the accounts' feeds still kept and from
// what their pruning kept of them (order_terms), in the order of the feeds.
func (a *auditor) readMoves(ctx context.Context, markets []market) (map[uuid.UUID]*history, error) {
	ids := make([]uuid.UUID, len(markets))
	for i := range markets {
		ids[i] = markets[i].id
	}
	rows, err := a.tx.Query(ctx, `select id, account_id, created_at from orders
		where market_id = any ($1) and priority is not null`, ids)
	if err != nil {
		return nil, fmt.Errorf("audit: reading the amended orders: %w", err)
	}
	moved := map[uuid.UUID]*history{}
	since := map[int64]time.Time{}
	for rows.Next() {
		var id uuid.UUID
		var account int64
		var at time.Time
		if err := rows.Scan(&id, &account, &at); err != nil {
			return nil, fmt.Errorf("audit: reading the amended orders: %w", err)
		}
		moved[id] = &history{}
		if t, ok := since[account]; !ok || at.Before(t) {
			since[account] = at
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: reading the amended orders: %w", err)
	}
	if len(moved) == 0 {
		return moved, nil
	}
	orders := make([]uuid.UUID, 0, len(moved))
	for id := range moved {
		orders = append(orders, id)
	}
	kept, err := a.tx.Query(ctx, `select order_id, holder, seq, position, amended, price, quantity, filled, at, coalesce(priority, 0)
		from order_terms where order_id = any ($1)`, orders)
	if err != nil {
		return nil, fmt.Errorf("audit: reading the orders' terms kept from the pruned feeds (order_terms): %w", err)
	}
	for kept.Next() {
		var t feed.Terms
		if err := kept.Scan(&t.Order, &t.Holder, &t.Seq, &t.Position, &t.Amended, &t.Price, &t.Quantity, &t.Filled, &t.At, &t.Priority); err != nil {
			return nil, fmt.Errorf("audit: reading the orders' terms kept from the pruned feeds (order_terms): %w", err)
		}
		h := moved[t.Order]
		h.events, h.archived = append(h.events, t), true
	}
	if err := kept.Err(); err != nil {
		return nil, fmt.Errorf("audit: reading the orders' terms kept from the pruned feeds (order_terms): %w", err)
	}
	accounts := make([]int64, 0, len(since))
	earliest := time.Time{}
	for acc, t := range since {
		accounts = append(accounts, acc)
		if earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
	}
	feeds, err := a.tx.Query(ctx, `select account_id, holder, first_seq, last_seq, position, events from account_events
		where account_id = any ($1) and created_at >= $2`, accounts, earliest)
	if err != nil {
		return nil, fmt.Errorf("audit: reading the accounts' feeds: %w", err)
	}
	defer feeds.Close()
	for feeds.Next() {
		var holder string
		var account, first, last, position int64
		if err := feeds.Scan(&account, &holder, &first, &last, &position, nil); err != nil {
			return nil, fmt.Errorf("audit: reading the accounts' feeds: %w", err)
		}
		terms, err := feed.TermsOf(feeds.RawValues()[5], holder, first, last, position)
		if err != nil { // the orders whose terms it holds are then not replayed, or differ
			a.differ("account feed", uuid.Nil, fmt.Sprintf("account_events row (account_id, holder, first_seq) = (%d, '%s', %d)", account, holder, first),
				"account %d's events %d to %d of stream %q do not read as the orders' terms the replay needs: %v", account, first, last, holder, err)
			continue
		}
		for _, t := range terms {
			if h := moved[t.Order]; h != nil {
				h.events = append(h.events, t)
			}
		}
	}
	if err := feeds.Err(); err != nil {
		return nil, fmt.Errorf("audit: reading the accounts' feeds: %w", err)
	}
	for _, h := range moved {
		h.replay()
	}
	return moved, nil
}

// replay lays an order's terms events out in the order of its feed (by its batches' positions,
// then by number; an event both kept and copied counted once, the copy that tells a move's number
// if one does: a sweeper of the release before copies none) into its history.
func (h *history) replay() {
	slices.SortFunc(h.events, func(x, y feed.Terms) int {
		return cmp.Or(cmp.Compare(x.Position, y.Position), cmp.Compare(x.Holder, y.Holder), cmp.Compare(x.Seq, y.Seq),
			cmp.Compare(y.Priority, x.Priority))
	})
	h.events = slices.CompactFunc(h.events, func(x, y feed.Terms) bool { return x.Holder == y.Holder && x.Seq == y.Seq })
	for _, e := range h.events {
		if !e.Amended {
			h.accepted, h.price, h.quantity = true, e.Price, e.Quantity
			continue
		}
		h.amends = append(h.amends, amend{price: e.Price, quantity: e.Quantity, filled: e.Filled, at: e.At, priority: e.Priority})
	}
	h.events = nil
}

// position is a holding: an account's shares of one outcome of a market.
type position struct {
	account int64
	outcome engine.Outcome
}

func (a *auditor) readPositions(ctx context.Context, m uuid.UUID) (map[position][2]int64, error) {
	rows, err := a.tx.Query(ctx, `select account_id, outcome, quantity, locked_quantity from positions where market_id = $1`, m)
	if err != nil {
		return nil, fmt.Errorf("audit: reading the positions of market %s: %w", m, err)
	}
	defer rows.Close()
	ps := map[position][2]int64{}
	var outcome string
	for rows.Next() {
		var p position
		var q, l int64
		if err := rows.Scan(&p.account, &outcome, &q, &l); err != nil {
			return nil, err
		}
		p.outcome, _ = engine.ParseOutcome(outcome)
		ps[p] = [2]int64{q, l}
	}
	return ps, rows.Err()
}

func (a *auditor) readSettlements(ctx context.Context, m uuid.UUID) (map[position][2]int64, error) {
	rows, err := a.tx.Query(ctx, `select account_id, outcome, quantity, amount from settlements where market_id = $1`, m)
	if err != nil {
		return nil, fmt.Errorf("audit: reading the settlements of market %s: %w", m, err)
	}
	defer rows.Close()
	ss := map[position][2]int64{}
	var outcome string
	for rows.Next() {
		var p position
		var q, amount int64
		if err := rows.Scan(&p.account, &outcome, &q, &amount); err != nil {
			return nil, err
		}
		p.outcome, _ = engine.ParseOutcome(outcome)
		ss[p] = [2]int64{q, amount}
	}
	return ss, rows.Err()
}

// storedCash reads what Postgres holds of each account's cash: its available and its locked cents,
// as account_balances (migration 032) has them — available is the account's wallet and what every
// shard holds of it free (its allocations, docs/architecture.md §11), locked what its open BUY
// orders lock — and its grant. It is the one place the audit reads a stored balance.
func storedCash(ctx context.Context, q pgx.Tx) (map[int64][2]int64, map[int64]int64, error) {
	rows, err := q.Query(ctx, `select a.id, b.available, b.locked, a.granted from accounts a join account_balances b on b.id = a.id`)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: reading the accounts' cash: %w", err)
	}
	defer rows.Close()
	cash, granted := map[int64][2]int64{}, map[int64]int64{}
	for rows.Next() {
		var id, available, locked, g int64
		if err := rows.Scan(&id, &available, &locked, &g); err != nil {
			return nil, nil, fmt.Errorf("audit: reading the accounts' cash: %w", err)
		}
		cash[id] = [2]int64{available, locked}
		granted[id] = g
	}
	return cash, granted, rows.Err()
}
