package history

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Violation is one thing the history and the log disagree on.
type Violation struct {
	Check  string    // which check: see Check
	Order  uuid.UUID // the order to look at (uuid.Nil when none is known)
	Detail string    // what was answered, what the log holds, and the operations' times
}

func (v Violation) String() string {
	if v.Order == uuid.Nil {
		return v.Check + ": " + v.Detail
	}
	return fmt.Sprintf("%s: order %s: %s", v.Check, v.Order, v.Detail)
}

// Report is what Check found.
type Report struct {
	Ops, Orders, Trades int // the operations checked, and the log's orders and trades read
	Fills               int // the fills answers reported that matched the log's trades
	Linearized          int // the orders whose operations Porcupine checked
	Unknown             int // of those, the ones whose search timed out (linearizeTimeout): not violations
	Took                time.Duration
	Violations          []Violation
}

// row is an order's row.
type row struct {
	id              uuid.UUID
	market          uuid.UUID
	seq             int64
	account         uuid.UUID
	side, outcome   string
	price           int
	quantity        int64
	filled          int64
	status          string
	clientOrderID   string
	timeInForce     string
	taker, maker    []*trade // its trades as taker and as maker, in seq order
	amends, unknown int      // its amends in the history: all, and those of unknown outcome
	placed          *Op      // its acknowledged placement (201), if in the history
}

// trade is a trade's row.
type trade struct {
	id           uuid.UUID
	market       uuid.UUID
	seq          int64
	yesPrice     int
	quantity     int64
	taker, maker *row
	at           time.Time
}

// log is what Check reads of Postgres.
type log struct {
	byID    map[uuid.UUID]*row
	bySeq   map[orderKey]*row
	byCID   map[cidKey][]*row
	trades  int
	markets []uuid.UUID
}

type orderKey struct {
	market uuid.UUID
	seq    int64
}

type cidKey struct {
	account uuid.UUID
	cid     string
}

// Check checks a history against the log in Postgres, read in one snapshot (so a process may still
// be writing it, though what it writes after the history ends is then checked against the history
// as if it had been part of it), and reports every disagreement:
//
//   - placement: every acknowledged placement (201) is an order in Postgres with its id, market,
//     side, outcome, account, client order id, and price and quantity unless the history amends it;
//     its answer echoes the request.
//   - fills: the fills a placement's answer reported add up to its filled quantity, are within its
//     limit, and are the log's trades in which the order was the taker, in seq order (id, YES
//     price, price in the taker's terms, quantity), followed by those its acknowledged amends
//     reported; and each order's filled quantity in Postgres is the total of its trades.
//   - trade-price: a trade between orders placed in the history and never amended is at the
//     maker's price and within the taker's limit.
//   - queue: the trades one batch made of a taker are at prices ever worse for it, and at one
//     price with makers in their time priority (where the history placed them and never amended
//     them).
//   - final: a cancel or an amend answered with a final state (CANCELLED,
//     PARTIALLY_FILLED_CANCELLED, FILLED) is the order's row: the same status and filled quantity,
//     so no fill came after it; one answered order_not_open names an order whose row is final.
//   - amend: an order whose amends all answered has the price and quantity of the last one.
//   - client-order-id: the placements of one client order id (the first, its retries after a 503
//     or no answer, its replays) were all answered with one order, Postgres holds at most one
//     order for it, and that one when any was answered.
//   - monotonic-reads: per client and order, no answer (placement, replay, amend, cancel, read)
//     shows a smaller filled quantity, or an open status after a final one, than an answer the
//     client had before it was sent; and none shows more than the row holds at the end.
//   - linearizable: per order, Porcupine finds an order of its operations, and of its fills at
//     their batch's time, consistent with their real-time windows and the model (linearizeOrder).
func Check(ctx context.Context, h []Op, pool *pgxpool.Pool) (*Report, error) {
	start := time.Now()
	l, err := readLog(ctx, h, pool)
	if err != nil {
		return nil, err
	}
	c := &checker{h: h, l: l}
	c.resolve()
	c.placements()
	c.clientOrderIDs()
	c.finals()
	c.trades()
	c.monotonicReads()
	n, unknown := c.linearizable()
	slices.SortStableFunc(c.v, func(a, b Violation) int { // by check and order, whatever the maps' order
		return cmp.Or(cmp.Compare(a.Check, b.Check), cmp.Compare(a.Order.String(), b.Order.String()))
	})
	return &Report{Ops: len(h), Orders: len(l.byID), Trades: l.trades, Fills: c.fills, Linearized: n, Unknown: unknown, Took: time.Since(start), Violations: c.v}, nil
}

// readLog reads the orders of the markets the history traded in, and their trades, in one
// snapshot.
func readLog(ctx context.Context, h []Op, pool *pgxpool.Pool) (*log, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("history: read the log: %w", err)
	}
	defer tx.Rollback(ctx)
	l := &log{byID: map[uuid.UUID]*row{}, bySeq: map[orderKey]*row{}, byCID: map[cidKey][]*row{}}
	for i := range h {
		for _, m := range []uuid.UUID{h[i].Req.MarketID, marketOf(&h[i])} {
			if m != uuid.Nil && !slices.Contains(l.markets, m) {
				l.markets = append(l.markets, m)
			}
		}
	}
	rows, err := tx.Query(ctx, `
		select o.id, o.market_id, o.seq, a.uid, o.side, o.outcome, o.price, o.quantity, o.filled_quantity, o.status,
		       coalesce(o.client_order_id, ''), coalesce(o.time_in_force, 'GTC')
		from orders o join accounts a on a.id = o.account_id where o.market_id = any($1)`, l.markets)
	if err != nil {
		return nil, fmt.Errorf("history: read the orders: %w", err)
	}
	for rows.Next() {
		r := &row{}
		if err := rows.Scan(&r.id, &r.market, &r.seq, &r.account, &r.side, &r.outcome, &r.price, &r.quantity, &r.filled,
			&r.status, &r.clientOrderID, &r.timeInForce); err != nil {
			rows.Close()
			return nil, fmt.Errorf("history: read the orders: %w", err)
		}
		l.byID[r.id], l.bySeq[orderKey{r.market, r.seq}] = r, r
		if r.clientOrderID != "" {
			k := cidKey{r.account, r.clientOrderID}
			l.byCID[k] = append(l.byCID[k], r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history: read the orders: %w", err)
	}
	rows, err = tx.Query(ctx, `select id, market_id, seq, yes_price, quantity, taker_order_seq, maker_order_seq, created_at
		from trades where market_id = any($1) order by market_id, seq`, l.markets)
	if err != nil {
		return nil, fmt.Errorf("history: read the trades: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		t := &trade{}
		var takerSeq, makerSeq int64
		if err := rows.Scan(&t.id, &t.market, &t.seq, &t.yesPrice, &t.quantity, &takerSeq, &makerSeq, &t.at); err != nil {
			return nil, fmt.Errorf("history: read the trades: %w", err)
		}
		t.taker, t.maker = l.bySeq[orderKey{t.market, takerSeq}], l.bySeq[orderKey{t.market, makerSeq}]
		if t.taker == nil || t.maker == nil {
			return nil, fmt.Errorf("history: trade %s (seq %d of market %s) names an order that is not in Postgres", t.id, t.seq, t.market)
		}
		t.taker.taker = append(t.taker.taker, t)
		t.maker.maker = append(t.maker.maker, t)
		l.trades++
	}
	return l, rows.Err()
}

func marketOf(o *Op) uuid.UUID {
	if o.Ans.Order != nil {
		return o.Ans.Order.MarketID
	}
	return uuid.Nil
}

type checker struct {
	h     []Op
	l     *log
	order []*row // the order each operation is of (nil: none known)
	fills int    // the reported fills found in the log
	v     []Violation
}

func (c *checker) fail(check string, order uuid.UUID, format string, args ...any) {
	c.v = append(c.v, Violation{Check: check, Order: order, Detail: fmt.Sprintf(format, args...)})
}

// resolve finds the order each operation is of: the one its answer names, or its request's, by
// id or by client order id.
func (c *checker) resolve() {
	c.order = make([]*row, len(c.h))
	for i := range c.h {
		op := &c.h[i]
		var r *row
		switch {
		case op.Ans.Order != nil:
			r = c.l.byID[op.Ans.Order.ID]
		case op.Kind != Place && op.Req.OrderID != uuid.Nil:
			r = c.l.byID[op.Req.OrderID]
		case op.Req.ClientOrderID != "":
			if rs := c.l.byCID[cidKey{op.Account, op.Req.ClientOrderID}]; len(rs) == 1 {
				r = rs[0]
			}
		}
		c.order[i] = r
		if r == nil {
			continue
		}
		switch {
		case op.Kind == Place && op.Ans.HTTP == 201 && op.Ans.Order != nil:
			r.placed = op
		case op.Kind == Amend:
			r.amends++
			if op.Unknown() {
				r.unknown++
			}
		}
	}
}

// placements checks each acknowledged placement against its order's row and its fills against the
// log's trades.
func (c *checker) placements() {
	for i := range c.h {
		op := &c.h[i]
		if op.Kind != Place || !op.Acked() {
			continue
		}
		a, q := op.Ans.Order, &op.Req
		r := c.order[i]
		if r == nil {
			c.fail("placement", a.ID, "acknowledged (%s), and not in Postgres", op)
			continue
		}
		if op.Ans.HTTP != 201 {
			continue // a replay: the client order id's check
		}
		if a.MarketID != q.MarketID || a.Side != q.Side || a.Outcome != q.Outcome || a.Price != q.Price || a.Quantity != q.Quantity ||
			derefOr(a.ClientOrderID) != q.ClientOrderID {
			c.fail("placement", a.ID, "the answer is not the order asked for: %s", op)
		}
		if r.market != q.MarketID || r.side != q.Side || r.outcome != q.Outcome || r.account != op.Account || r.clientOrderID != q.ClientOrderID ||
			r.amends == 0 && (r.price != q.Price || r.quantity != q.Quantity) {
			c.fail("placement", a.ID, "Postgres holds %s %s at %d for %d, account %s, client order id %q in market %s; the placement was %s",
				r.side, r.outcome, r.price, r.quantity, r.account, r.clientOrderID, r.market, op)
		}
		if !op.Ans.FillsReported {
			continue
		}
		var sum int64
		for k, f := range op.Ans.Fills {
			sum += f.Quantity
			if q.Side == "BUY" && f.Price > q.Price || q.Side == "SELL" && f.Price < q.Price {
				c.fail("fills", a.ID, "fill %d (trade %s) reported at %d, beyond the limit %d: %s", k, f.ID, f.Price, q.Price, op)
			}
		}
		if sum != a.FilledQuantity {
			c.fail("fills", a.ID, "the answer reports fills of %d in all and a filled quantity of %d: %s", sum, a.FilledQuantity, op)
		}
		c.takerFills(op, r)
	}
}

// takerFills compares the fills reported by an order's placement, then by its acknowledged amends
// in the order they answered, with the log's trades in which it was the taker.
func (c *checker) takerFills(placed *Op, r *row) {
	type reported struct {
		op   *Op
		fill int
	}
	var want []reported
	for k := range placed.Ans.Fills {
		want = append(want, reported{placed, k})
	}
	var amends []*Op
	for i := range c.h {
		if op := &c.h[i]; op.Kind == Amend && c.order[i] == r && op.Acked() && op.Ans.FillsReported {
			amends = append(amends, op)
		}
	}
	slices.SortFunc(amends, func(a, b *Op) int { return a.Return.Compare(b.Return) })
	for _, op := range amends {
		for k := range op.Ans.Fills {
			want = append(want, reported{op, k})
		}
	}
	whole := r.unknown == 0 // else the trades may go on past what the answers reported
	for k, w := range want {
		f := w.op.Ans.Fills[w.fill]
		if k >= len(r.taker) {
			c.fail("fills", r.id, "fill %d reported (trade %s, %d at %d) is not in the log, which has %d trades with the order as taker: %s",
				k, f.ID, f.Quantity, f.Price, len(r.taker), w.op)
			return
		}
		t := r.taker[k]
		if t.id != f.ID || t.yesPrice != f.YesPrice || t.quantity != f.Quantity || outcomePrice(r.outcome, t.yesPrice) != f.Price {
			c.fail("fills", r.id, "fill %d reported as trade %s, %d at %d (YES %d); the log's taker trade %d is %s (seq %d), %d at %d (YES %d): %s",
				k, f.ID, f.Quantity, f.Price, f.YesPrice, k, t.id, t.seq, t.quantity, outcomePrice(r.outcome, t.yesPrice), t.yesPrice, w.op)
			return
		}
		c.fills++
	}
	if whole && len(r.taker) > len(want) {
		t := r.taker[len(want)]
		c.fail("fills", r.id, "the log has %d trades with the order as taker, its answers reported %d; the first not reported is %s (seq %d), %d at YES %d",
			len(r.taker), len(want), t.id, t.seq, t.quantity, t.yesPrice)
	}
}

// clientOrderIDs checks that each client order id the history placed with was answered with one
// order, has at most one in Postgres, and that one when any placement of it was answered.
func (c *checker) clientOrderIDs() {
	type group struct {
		answered map[uuid.UUID]*Op
		ops      int
	}
	groups := map[cidKey]*group{}
	var keys []cidKey
	for i := range c.h {
		op := &c.h[i]
		if op.Kind != Place || op.Req.ClientOrderID == "" {
			continue
		}
		k := cidKey{op.Account, op.Req.ClientOrderID}
		g := groups[k]
		if g == nil {
			g = &group{answered: map[uuid.UUID]*Op{}}
			groups[k] = g
			keys = append(keys, k)
		}
		g.ops++
		if op.Acked() {
			g.answered[op.Ans.Order.ID] = op
		}
	}
	for _, k := range keys {
		g, rows := groups[k], c.l.byCID[k]
		var ids []uuid.UUID
		for _, r := range rows {
			ids = append(ids, r.id)
		}
		if len(g.answered) > 1 {
			var ans []string
			for _, op := range g.answered {
				ans = append(ans, op.String())
			}
			slices.Sort(ans)
			c.fail("client-order-id", uuid.Nil, "%s of account %s: its %d placements were answered with %d orders: %s",
				k.cid, k.account, g.ops, len(g.answered), strings.Join(ans, "; "))
		}
		if len(rows) > 1 {
			c.fail("client-order-id", uuid.Nil, "%s of account %s: Postgres holds %d orders for it: %v", k.cid, k.account, len(rows), ids)
		}
		for id, op := range g.answered {
			if len(rows) != 1 || rows[0].id != id {
				c.fail("client-order-id", id, "%s of account %s was answered with this order; Postgres holds %v for it: %s", k.cid, k.account, ids, op)
			}
		}
	}
}

// finals checks the cancels and amends: a final state answered is the row's; order_not_open names
// a final row; the last of an order's amends, when all answered, set its price and quantity.
func (c *checker) finals() {
	last := map[*row]*Op{}
	for i := range c.h {
		op, r := &c.h[i], c.order[i]
		if op.Kind != Cancel && op.Kind != Amend || r == nil {
			continue
		}
		switch {
		case op.Acked() && final(op.Ans.Order.Status):
			if a := op.Ans.Order; r.status != a.Status || r.filled != a.FilledQuantity {
				c.fail("final", r.id, "answered %s with %d filled; Postgres holds %s with %d filled (%d trades): %s",
					a.Status, a.FilledQuantity, r.status, r.filled, len(r.taker)+len(r.maker), op)
			}
		case op.Ans.HTTP == 400 && op.Ans.Code == "order_not_open" && !final(r.status):
			c.fail("final", r.id, "answered order_not_open; Postgres holds it %s with %d filled: %s", r.status, r.filled, op)
		}
		if op.Kind == Amend && op.Acked() && (last[r] == nil || op.Return.After(last[r].Return)) {
			last[r] = op
		}
	}
	for r, op := range last {
		if r.unknown == 0 && (r.price != op.Ans.Order.Price || r.quantity != op.Ans.Order.Quantity) {
			c.fail("amend", r.id, "Postgres holds price %d and quantity %d; its last amend answered %d and %d: %s",
				r.price, r.quantity, op.Ans.Order.Price, op.Ans.Order.Quantity, op)
		}
	}
}

// trades checks each order's filled quantity against its trades, and each trade between orders
// the history placed and never amended against the maker's price and the taker's limit.
func (c *checker) trades() {
	for _, r := range c.l.byID {
		var sum int64
		for _, t := range r.taker {
			sum += t.quantity
		}
		for _, t := range r.maker {
			sum += t.quantity
		}
		if sum != r.filled {
			c.fail("fills", r.id, "Postgres holds %d filled; its trades add up to %d", r.filled, sum)
		}
		c.queue(r)
		if r.placed == nil || r.amends > 0 {
			continue
		}
		for _, t := range r.maker {
			if t.yesPrice != yesPrice(r.outcome, r.price) {
				c.fail("trade-price", r.id, "trade %s (seq %d) at YES %d; the order, its maker, rests at %s %d (YES %d)",
					t.id, t.seq, t.yesPrice, r.outcome, r.price, yesPrice(r.outcome, r.price))
			}
		}
		for _, t := range r.taker {
			if p := outcomePrice(r.outcome, t.yesPrice); r.side == "BUY" && p > r.price || r.side == "SELL" && p < r.price {
				c.fail("trade-price", r.id, "trade %s (seq %d) at %s %d; the order, its taker, is a %s limited at %d",
					t.id, t.seq, r.outcome, p, r.side, r.price)
			}
		}
	}
}

// queue checks that the trades one batch made of an order as taker met the book in its order: the
// best price first, and at one price the order that rested first first, where both makers were
// placed in the history and never amended (an amend may move an order to the back of its level).
func (c *checker) queue(r *row) {
	buysYes := r.side == "BUY" && r.outcome == "YES" || r.side == "SELL" && r.outcome == "NO"
	for k := 1; k < len(r.taker); k++ {
		a, b := r.taker[k-1], r.taker[k]
		if !a.at.Equal(b.at) {
			continue // another batch: an amend's
		}
		switch {
		case buysYes && b.yesPrice < a.yesPrice || !buysYes && b.yesPrice > a.yesPrice:
			c.fail("queue", r.id, "as taker it traded at YES %d (trade %s, seq %d) before YES %d (trade %s, seq %d), the better price for it",
				a.yesPrice, a.id, a.seq, b.yesPrice, b.id, b.seq)
		case a.yesPrice == b.yesPrice && a.maker != b.maker && b.maker.seq < a.maker.seq && untouched(a.maker) && untouched(b.maker):
			c.fail("queue", r.id, "as taker it met order %s (seq %d, trade %s) before order %s (seq %d, trade %s), which rested at the same price before it",
				a.maker.id, a.maker.seq, a.id, b.maker.id, b.maker.seq, b.id)
		}
	}
}

// untouched reports whether an order was placed in the history and never amended: its priority is
// its seq.
func untouched(r *row) bool { return r.placed != nil && r.amends == 0 }

// seen is one state of an order a client was answered with.
type seen struct {
	op     *Op
	status string
	filled int64
}

// observations are the states of orders the history's answers show, by order.
func (c *checker) observations() map[*row][]seen {
	out := map[*row][]seen{}
	for i := range c.h {
		op, r := &c.h[i], c.order[i]
		if r != nil && op.Acked() && op.Ans.Order.ID == r.id {
			out[r] = append(out[r], seen{op, op.Ans.Order.Status, op.Ans.Order.FilledQuantity})
		}
	}
	return out
}

// monotonicReads checks that no client is shown an order's state older than one it was shown
// before, nor one ahead of the order's row.
func (c *checker) monotonicReads() {
	for r, obs := range c.observations() {
		for _, b := range obs {
			if b.filled > r.filled || final(b.status) && (b.status != r.status || b.filled != r.filled) {
				c.fail("monotonic-reads", r.id, "answered %s with %d filled; Postgres ends with %s and %d filled: %s",
					b.status, b.filled, r.status, r.filled, b.op)
			}
			for _, a := range obs {
				if a.op.Client != b.op.Client || !a.op.Return.Before(b.op.Call) {
					continue
				}
				if b.filled < a.filled || final(a.status) && !final(b.status) {
					c.fail("monotonic-reads", r.id, "%s was shown %s with %d filled, then %s with %d filled: %s, then %s",
						b.op.Client, a.status, a.filled, b.status, b.filled, a.op, b.op)
				}
			}
		}
	}
}

// final reports whether an order's status is final.
func final(status string) bool {
	return status == "FILLED" || status == "CANCELLED" || status == "PARTIALLY_FILLED_CANCELLED"
}

// yesPrice is an order's price in YES terms: a NO at q is a YES at 100 − q.
func yesPrice(outcome string, price int) int {
	if outcome == "NO" {
		return 100 - price
	}
	return price
}

// outcomePrice is a YES price in an outcome's terms.
func outcomePrice(outcome string, yes int) int { return yesPrice(outcome, yes) }

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
