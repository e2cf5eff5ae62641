package audit

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/feed"
)

// opKind is what a command of the replay does to an order after placing it.
type opKind uint8

const (
	opMove    opKind = iota + 1 // an amend that took a number of the order sequence: a step of its own
	opInPlace                   // an amend that kept the order's place: not numbered
	opCancel                    // a cancel that is not the engine's: not numbered
)

// op is a command on a placed order: an amend or a cancel.
type op struct {
	kind      opKind
	price     int
	remaining int64
	filled    int64     // the order's filled quantity when the command ran, per the log
	at        time.Time // the batch's time
	priority  int64     // a move's number of the order sequence, as its event tells it; 0: not told
}

// step is a number of a market's order sequence: the placement of the order of that seq, or an
// amend that moved an order (its priority, or a number an amend of it took before its last), or a
// number nothing holds.
type step struct {
	order *order
	move  bool
	at    time.Time
}

// replay is one market's replay.
type replay struct {
	a       *auditor
	m       market
	book    *engine.Book
	res     engine.Result
	orders  []order
	bySeq   map[int64]*order
	trades  []trade
	next    int // the next trade the replay's fills are compared with
	queue   map[*order][]op
	heads   opHeap
	waiting map[*order]bool // orders whose head op's batch has come, waiting for its fills
	woken   []*order
	reasons map[*order]string
	// archived are the orders replayed from terms the feeds' pruning kept (order_terms): a
	// difference about one names them, as what to look at beside the rows.
	archived map[int64]bool
}

// lookTerms names, for a difference about the orders of seqs, the terms of those among them that
// the replay read from order_terms: "" when none is.
func (r *replay) lookTerms(seqs ...int64) string {
	var b strings.Builder
	for i, seq := range seqs {
		if o := r.bySeq[seq]; o != nil && r.archived[seq] && !slices.Contains(seqs[:i], seq) {
			fmt.Fprintf(&b, ", and order seq %d's terms as accepted and amended, kept from its pruned feed: order_terms rows order_id = %s", seq, o.id)
		}
	}
	return b.String()
}

// market replays one market and compares what it derives with Postgres.
func (a *auditor) market(ctx context.Context, m market, moves map[uuid.UUID]*history) error {
	orders, err := a.readOrders(ctx, m.id)
	if err != nil {
		return err
	}
	trades, err := a.readTrades(ctx, m.id)
	if err != nil {
		return err
	}
	r := &replay{a: a, m: m, book: engine.New(1024), orders: orders, bySeq: make(map[int64]*order, len(orders)), trades: trades,
		queue: map[*order][]op{}, waiting: map[*order]bool{}, reasons: map[*order]string{}, archived: map[int64]bool{}}
	steps, why := r.plan(moves)
	if why != "" {
		a.r.CannotCheck = append(a.r.CannotCheck, fmt.Sprintf("market %s is not replayed: %s", m.id, why))
		a.ledger.partial = true
		a.ledger.unknown[a.exchange] = true // the fees of the market's fills
		for i := range orders {
			a.ledger.unknown[orders[i].account] = true
		}
		return nil
	}
	r.run(steps)
	a.r.Replayed++
	a.r.Trades += len(trades)
	r.compareOrders()
	if err := r.compareFeed(ctx); err != nil {
		return err
	}
	return r.compareHoldings(ctx)
}

// plan lays out a market's commands: its steps, in number order, and each order's ops. It answers
// why the market cannot be replayed, if it cannot.
func (r *replay) plan(moves map[uuid.UUID]*history) ([]step, string) {
	var last int64
	for i := range r.orders {
		o := &r.orders[i]
		r.bySeq[o.seq] = o
		last = max(last, o.seq, o.priority)
	}
	steps := make([]step, last)
	type early struct {
		o *order
		i int // its index in the order's ops
	}
	var overwritten []early
	for i := range r.orders {
		o := &r.orders[i]
		o.terms = engine.Order{ID: engine.OrderID(o.seq), Account: engine.AccountID(o.account), Side: o.side, Outcome: o.outcome,
			TimeInForce: o.tif, PostOnly: o.postOnly, SelfTrade: o.stp, Price: o.price, Quantity: o.quantity, Fees: o.fees}
		if held := steps[o.seq-1].order; held != nil {
			r.a.differ("numbering", r.m.id, fmt.Sprintf("orders rows (market_id, seq) = (%s, %d) and (%s, %d)", r.m.id, o.seq, r.m.id, held.seq),
				"order seq %d is also the priority of order seq %d: one number of the order sequence is held twice", o.seq, held.seq)
		}
		steps[o.seq-1] = step{order: o, at: o.created}
		var ops []op
		if o.priority != 0 {
			h := moves[o.id]
			if h == nil || !h.accepted {
				return nil, fmt.Sprintf("order %s (seq %d) was moved by an amend (its priority is %d), but neither its account's feed (account_events) nor what its pruning keeps (order_terms) holds its terms when placed: its feed was pruned by a pmx older than migration 037, which kept nothing of it (docs/operations.md, \"Keeping the log long enough\")",
					o.id, o.seq, o.priority)
			}
			o.terms.Price, o.terms.Quantity = h.price, h.quantity
			if h.archived {
				r.archived[o.seq] = true
			}
			price, quantity := h.price, h.quantity
			lastMove := -1
			for _, am := range h.amends {
				kind := opInPlace
				before := engine.OrderState{Order: engine.Order{Side: o.side, Price: price, Quantity: quantity}, Filled: am.filled}
				if !before.AmendKeepsPriority(am.price, am.quantity-am.filled) { // the engine's rule
					kind, lastMove = opMove, len(ops)
				} else if am.priority != 0 {
					r.a.differ("numbering", r.m.id, fmt.Sprintf("orders row (market_id, seq) = (%s, %d) and its account's feed (account_events, or order_terms once pruned)%s", r.m.id, o.seq, r.lookTerms(o.seq)),
						"order %s (seq %d) took number %d of the order sequence when amended to %d at %d, per its account's feed, but the engine's rule keeps its place on that amend",
						o.id, o.seq, am.priority, am.quantity, am.price)
				}
				ops = append(ops, op{kind: kind, price: am.price, remaining: am.quantity - am.filled, filled: am.filled, at: am.at, priority: am.priority})
				price, quantity = am.price, am.quantity
			}
			if lastMove >= 0 && ops[lastMove].priority != 0 && ops[lastMove].priority != o.priority {
				r.a.differ("numbering", r.m.id, fmt.Sprintf("orders row (market_id, seq) = (%s, %d) and its account's feed (account_events, or order_terms once pruned)%s", r.m.id, o.seq, r.lookTerms(o.seq)),
					"order %s (seq %d) has priority %d, but its last move took number %d of the order sequence, per its account's feed", o.id, o.seq, o.priority, ops[lastMove].priority)
			}
			if lastMove < 0 {
				r.a.differ("numbering", r.m.id, fmt.Sprintf("orders row (market_id, seq) = (%s, %d)", r.m.id, o.seq),
					"order %s (seq %d) has priority %d, but no amend in its account's feed moved it", o.id, o.seq, o.priority)
			} else if held := steps[o.priority-1].order; held != nil {
				r.a.differ("numbering", r.m.id, fmt.Sprintf("orders rows (market_id, seq) = (%s, %d) and (%s, %d)", r.m.id, o.seq, r.m.id, held.seq),
					"order %s (seq %d) has priority %d, a number order seq %d already holds", o.id, o.seq, o.priority, held.seq)
			} else {
				steps[o.priority-1] = step{order: o, move: true, at: ops[lastMove].at}
				for j := range lastMove {
					if ops[j].kind == opMove {
						overwritten = append(overwritten, early{o, j})
					}
				}
			}
		}
		if o.status == engine.StatusCancelled || o.status == engine.StatusPartiallyFilledCancelled {
			switch o.reason {
			case "IOC", "FOK", "SELF_TRADE": // the engine's to make
			default:
				if o.reason == "EXPIRED" && !o.expires.After(o.created) {
					break // expired before its batch: recorded, never in the book (see run)
				}
				ops = append(ops, op{kind: opCancel, filled: o.filled, at: o.updated})
			}
		}
		if len(ops) > 0 {
			r.queue[o] = ops
		}
	}
	// The numbers an order's earlier moves took were overwritten by its later ones: they are the
	// numbers no order holds. A move whose event tells its number (feed.Terms.Priority) takes it.
	var guessed []early
	for _, e := range overwritten {
		p := &r.queue[e.o][e.i]
		if p.priority == 0 {
			guessed = append(guessed, e)
			continue
		}
		look := fmt.Sprintf("orders row (market_id, seq) = (%s, %d) and its account's feed (account_events, or order_terms once pruned)%s", r.m.id, e.o.seq, r.lookTerms(e.o.seq))
		if p.priority < 1 || p.priority > int64(len(steps)) {
			r.a.differ("numbering", r.m.id, look, "order %s (seq %d) took number %d of the order sequence when amended to %d at %d, per its account's feed, but the market's orders end at number %d",
				e.o.id, e.o.seq, p.priority, p.remaining+p.filled, p.price, len(steps))
		} else if held := steps[p.priority-1].order; held != nil {
			r.a.differ("numbering", r.m.id, look, "order %s (seq %d) took number %d of the order sequence when amended to %d at %d, per its account's feed, but order seq %d holds it",
				e.o.id, e.o.seq, p.priority, p.remaining+p.filled, p.price, held.seq)
		} else {
			steps[p.priority-1] = step{order: e.o, move: true, at: p.at}
			continue
		}
		guessed = append(guessed, e) // replayed at a free number, as one not told
	}
	// The others, in feeds written before the shards told a move's number, take the numbers left
	// in time order, ties (the moves of one batch) broken by the order's seq: a guess, which
	// can be wrong where a placement of the batch came between two of its moves.
	slices.SortStableFunc(guessed, func(x, y early) int {
		return cmp.Or(r.queue[x.o][x.i].at.Compare(r.queue[y.o][y.i].at), cmp.Compare(x.o.seq, y.o.seq))
	})
	k := 0
	for n := range steps {
		if steps[n].order != nil {
			continue
		}
		if k < len(guessed) {
			e := guessed[k]
			steps[n] = step{order: e.o, move: true, at: r.queue[e.o][e.i].at}
			k++
			continue
		}
		r.a.differ("numbering", r.m.id, fmt.Sprintf("the orders of market %s around seq %d, and the accounts' feeds (account_events) of its traders", r.m.id, n+1),
			"no order holds number %d of the order sequence and no amend took it: an acknowledged order may be missing", n+1)
	}
	if k < len(guessed) {
		r.a.differ("numbering", r.m.id, "the orders' priority and the accounts' feeds (account_events)",
			"the accounts' feeds hold %d amends that moved orders more than once without telling the number they took, but only %d numbers of the order sequence are free for them", len(guessed), k)
	}
	return steps, ""
}

// run replays the steps in number order, with every unnumbered op in the batch it ran in, once the
// order's fills before it are made.
func (r *replay) run(steps []step) {
	for o, ops := range r.queue {
		if ops[0].kind != opMove {
			heap.Push(&r.heads, head{o, ops[0].at})
		}
	}
	for i := range steps {
		s := &steps[i]
		if s.order == nil {
			continue
		}
		if i&0xffff == 0 {
			r.a.tick() // a market of millions of events takes seconds
		}
		r.drain(s.at)
		o := s.order
		if !s.move {
			r.place(o)
			continue
		}
		ops := r.queue[o]
		for len(ops) > 0 && ops[0].kind != opMove { // ops that should have run by now
			r.apply(o)
			ops = r.queue[o]
		}
		if len(ops) == 0 {
			continue
		}
		r.apply(o)
	}
	r.drain(time.Time{})
	for o := range r.waiting { // fills the log says came before an op that the replay never made
		r.apply(o)
	}
}

// place submits an order as it was placed.
func (r *replay) place(o *order) {
	r.a.r.Orders++
	if o.reason == "EXPIRED" && !o.expires.After(o.created) {
		o.state = engine.OrderState{Order: o.terms, Status: engine.StatusCancelled}
		r.reasons[o] = "EXPIRED"
		return
	}

	if err := r.book.Submit(o.terms, &r.res); err != nil {
		r.a.differ("order", r.m.id, fmt.Sprintf("orders row (market_id, seq) = (%s, %d)", r.m.id, o.seq),
			"order %s (seq %d) is in Postgres, but the engine refuses it: %v", o.id, o.seq, err)
		o.state = engine.OrderState{Order: o.terms, Status: o.status, Filled: o.filled}
		if r.waiting[o] {
			r.woken = append(r.woken, o)
		}
		return
	}
	r.settle(o)
}

// settle compares a submission's or an amend's fills with the trades, in order, and books them.
func (r *replay) settle(taker *order) {
	res := &r.res
	for i := range res.Fills {
		f := &res.Fills[i]
		r.fill(f)
		r.a.ledger.leg(r.m.id, &f.Taker)
		r.a.ledger.leg(r.m.id, &f.Maker)
		r.a.ledger.cash[r.a.exchange] += f.Taker.Fee + f.Maker.Fee
		if mk := r.bySeq[int64(f.Maker.Order)]; mk != nil {
			mk.state.Filled, mk.state.Status = f.Maker.Filled, f.Maker.Status
			if r.waiting[mk] {
				r.woken = append(r.woken, mk)
			}
		}
	}
	for i := range res.Cancelled {
		if c := r.bySeq[int64(res.Cancelled[i].ID)]; c != nil {
			c.state = res.Cancelled[i]
			r.reasons[c] = "SELF_TRADE"
		}
	}
	taker.state = res.Order
	if res.Reason != engine.ReasonNone {
		r.reasons[taker] = res.Reason.String()
	}
	if r.waiting[taker] { // placed, or filled, in the batch that then amended or cancelled it
		r.woken = append(r.woken, taker)
	}
}

// fill compares one of the replay's fills with the next trade of the log.
func (r *replay) fill(f *engine.Fill) {
	if r.next >= len(r.trades) {
		r.a.differ("fill", r.m.id, fmt.Sprintf("the trades of market %s after seq %d, and orders seq %d and %d%s", r.m.id, len(r.trades), f.Taker.Order, f.Maker.Order,
			r.lookTerms(int64(f.Taker.Order), int64(f.Maker.Order))),
			"the replay fills order seq %d (taker) against seq %d (maker), %d at %d, but Postgres holds no trade after seq %d",
			f.Taker.Order, f.Maker.Order, f.Quantity, f.YesPrice, len(r.trades))
		return
	}
	t := &r.trades[r.next]
	r.next++
	if t.takerSeq == int64(f.Taker.Order) && t.makerSeq == int64(f.Maker.Order) && t.yesPrice == f.YesPrice &&
		t.quantity == f.Quantity && t.kind == f.Kind.String() && t.takerAccount == int64(f.Taker.Account) &&
		t.makerAccount == int64(f.Maker.Account) {
		if t.takerFee != f.Taker.Fee || t.makerFee != f.Maker.Fee {
			r.a.differ("fee", r.m.id, fmt.Sprintf("trades row (market_id, seq) = (%s, %d), id %s, and its orders' fee schedules", r.m.id, t.seq, t.id),
				"trade seq %d charged the taker %d and the maker %d cents; the orders' schedules (engine.Fee) charge %d and %d",
				t.seq, t.takerFee, t.makerFee, f.Taker.Fee, f.Maker.Fee)
		}
		return
	}
	r.a.differ("fill", r.m.id, fmt.Sprintf("trades row (market_id, seq) = (%s, %d), id %s%s", r.m.id, t.seq, t.id,
		r.lookTerms(t.takerSeq, t.makerSeq, int64(f.Taker.Order), int64(f.Maker.Order))),
		"trade seq %d is taker seq %d (account %d), maker seq %d (account %d), %d at YES price %d, %s; the replay's fill there is taker seq %d (account %d), maker seq %d (account %d), %d at YES price %d, %s",
		t.seq, t.takerSeq, t.takerAccount, t.makerSeq, t.makerAccount, t.quantity, t.yesPrice, t.kind,
		f.Taker.Order, f.Taker.Account, f.Maker.Order, f.Maker.Account, f.Quantity, f.YesPrice, f.Kind)
}

// drain applies every unnumbered op whose batch came by until (zero: all of them) and whose
// order's fills before it are made.
func (r *replay) drain(until time.Time) {
	for {
		if len(r.woken) > 0 {
			o := r.woken[len(r.woken)-1]
			r.woken = r.woken[:len(r.woken)-1]
			if r.waiting[o] && r.ready(o) {
				delete(r.waiting, o)
				r.apply(o)
			}
			continue
		}
		if len(r.heads) == 0 || (!until.IsZero() && r.heads[0].at.After(until)) {
			return
		}
		h := heap.Pop(&r.heads).(head)
		ops := r.queue[h.o]
		if len(ops) == 0 || ops[0].kind == opMove || !ops[0].at.Equal(h.at) {
			continue // stale
		}
		if !r.ready(h.o) {
			r.waiting[h.o] = true
			continue
		}
		r.apply(h.o)
	}
}

// ready reports whether an order's next op can run: the order is placed and has made the fills the
// log says it had made when the op ran (or can make no more).
func (r *replay) ready(o *order) bool {
	return o.state.Status != 0 && (o.state.Filled >= r.queue[o][0].filled || !o.state.Status.Resting())
}

// apply runs an order's next op.
func (r *replay) apply(o *order) {
	ops := r.queue[o]
	p := ops[0]
	r.queue[o] = ops[1:]
	delete(r.waiting, o)
	look := fmt.Sprintf("orders row (market_id, seq) = (%s, %d) and the trades of that order%s", r.m.id, o.seq, r.lookTerms(o.seq))
	if o.state.Filled != p.filled {
		r.a.differ("order", r.m.id, look, "order %s (seq %d) had filled %d when its %s ran, per the log; the replay had filled %d",
			o.id, o.seq, p.filled, p.kind, o.state.Filled)
	}
	if _, resting := r.book.Order(engine.OrderID(o.seq)); !resting {
		r.a.differ("order", r.m.id, look, "order %s (seq %d) is %s in the log, but the replay had already finished it (%s, filled %d)",
			o.id, o.seq, map[bool]string{true: "cancelled", false: "amended"}[p.kind == opCancel], o.state.Status, o.state.Filled)
	} else if p.kind == opCancel {
		r.a.r.Cancel++
		st, _ := r.book.Cancel(engine.OrderID(o.seq))
		o.state = st
		r.reasons[o] = o.reason
	} else {
		r.a.r.Amends++
		if err := r.book.Amend(engine.OrderID(o.seq), p.price, p.remaining, &r.res); err != nil {
			r.a.differ("order", r.m.id, look, "order %s (seq %d) was amended to %d at %d in the log, but the engine refuses it: %v",
				o.id, o.seq, p.remaining, p.price, err)
		} else {
			r.settle(o)
		}
	}
	if rest := r.queue[o]; len(rest) > 0 && rest[0].kind != opMove {
		heap.Push(&r.heads, head{o, rest[0].at})
	}
}

func (k opKind) String() string {
	switch k {
	case opMove, opInPlace:
		return "amend"
	case opCancel:
		return "cancel"
	}
	return "op"
}

// compareOrders compares each order's final state, the fills left over and the book.
func (r *replay) compareOrders() {
	for i := r.next; i < len(r.trades); i++ {
		t := &r.trades[i]
		r.a.differ("fill", r.m.id, fmt.Sprintf("trades row (market_id, seq) = (%s, %d), id %s%s", r.m.id, t.seq, t.id, r.lookTerms(t.takerSeq, t.makerSeq)),
			"trade seq %d (taker seq %d, maker seq %d, %d at %d) is in Postgres, but the replay made no such fill", t.seq, t.takerSeq, t.makerSeq, t.quantity, t.yesPrice)
	}
	var open []*order
	for i := range r.orders {
		o := &r.orders[i]
		look := fmt.Sprintf("orders row (market_id, seq) = (%s, %d), id %s%s", r.m.id, o.seq, o.id, r.lookTerms(o.seq))
		if o.state.Status != o.status || o.state.Filled != o.filled {
			r.a.differ("order", r.m.id, look, "order seq %d is %s with %d filled in Postgres; the replay makes it %s with %d filled",
				o.seq, o.status, o.filled, o.state.Status, o.state.Filled)
		} else if o.state.Price != o.price || o.state.Quantity != o.quantity {
			r.a.differ("order", r.m.id, look, "order seq %d is %d at %d in Postgres; the replay makes it %d at %d",
				o.seq, o.quantity, o.price, o.state.Quantity, o.state.Price)
		} else if why := r.reasons[o]; why != o.reason && !(why == "USER" && o.reason == "") {
			r.a.differ("order", r.m.id, look, "order seq %d was cancelled for %q in Postgres; the replay cancels it for %q", o.seq, o.reason, why)
		}
		if o.status.Resting() {
			open = append(open, o)
		}
	}
	// The book a shard would rebuild from Postgres: its resting orders in priority order.
	slices.SortFunc(open, func(x, y *order) int { return cmp.Compare(cmp.Or(x.priority, x.seq), cmp.Or(y.priority, y.seq)) })
	rest := r.book.Resting(nil)
	if len(rest) != len(open) {
		r.a.differ("book", r.m.id, fmt.Sprintf("the resting orders of market %s (orders status OPEN or PARTIALLY_FILLED)", r.m.id),
			"Postgres holds %d resting orders, the replay's book %d", len(open), len(rest))
	} else {
		byPriority := map[int64]int{}
		for i, o := range open {
			byPriority[o.seq] = i
		}
		for i := 1; i < len(rest); i++ {
			a, b := rest[i-1], rest[i]
			if a.BookPrice() == b.BookPrice() && a.IsBid() == b.IsBid() && byPriority[int64(a.ID)] > byPriority[int64(b.ID)] {
				r.a.differ("book", r.m.id, fmt.Sprintf("orders seq %d and %d of market %s (priority)", a.ID, b.ID, r.m.id),
					"order seq %d is ahead of seq %d in the replay's queue at YES price %d, but a book rebuilt from Postgres puts it behind",
					a.ID, b.ID, a.BookPrice())
			}
		}
	}
	if got := r.book.LastTradePrice(); got != r.m.lastTrade {
		r.a.differ("book", r.m.id, fmt.Sprintf("markets row %s (last_trade_price)", r.m.id),
			"the market's last trade price is %d in Postgres, %d in the replay (0: none)", r.m.lastTrade, got)
	}
}

// head is an order whose next op is unnumbered, by its batch's time.
type head struct {
	o  *order
	at time.Time
}

type opHeap []head

func (h opHeap) Len() int { return len(h) }
func (h opHeap) Less(i, j int) bool {
	return h[i].at.Before(h[j].at) || (h[i].at.Equal(h[j].at) && h[i].o.seq < h[j].o.seq)
}
func (h opHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *opHeap) Push(x any)   { *h = append(*h, x.(head)) }
func (h *opHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// compareFeed compares the market's feed, as far as it is kept (market_events), with the replay:
// its trade events are the trades, in their order, and the last quantity it gives each price
// level, and the last status, are the replayed book's and the market's. A feed kept from its first
// event describes every level; a pruned one only those changed since.
func (r *replay) compareFeed(ctx context.Context) error {
	rows, err := r.a.tx.Query(ctx, `select first_seq, events from market_events where market_id = $1 order by first_seq`, r.m.id)
	if err != nil {
		return fmt.Errorf("audit: reading the feed of market %s: %w", r.m.id, err)
	}
	defer rows.Close()
	var levels [2][engine.Payout]int64
	var seen [2][engine.Payout]bool
	next := -1 // the index in r.trades of the trade the feed's next trade event must be; -1: not found yet
	status, first := "", int64(0)
	look := fmt.Sprintf("market_events of market %s", r.m.id)
	for rows.Next() {
		var from int64
		var events []feed.Event
		if err := rows.Scan(&from, &feedJSON{&events}); err != nil {
			return fmt.Errorf("audit: reading the feed of market %s: %w", r.m.id, err)
		}
		if first == 0 {
			first = from
		}
		for i := range events {
			e := &events[i]
			switch e.Type {
			case feed.TypeTrade:
				id, _ := uuid.Parse(e.TradeID)
				if next < 0 {
					next = slices.IndexFunc(r.trades, func(t trade) bool { return t.id == id })
					if next < 0 {
						r.a.differ("feed", r.m.id, look, "the feed's trade event %d names trade %s, which Postgres does not hold", e.Seq, e.TradeID)
						return nil
					}
				}
				if next >= len(r.trades) || r.trades[next].id != id || r.trades[next].yesPrice != e.Price || r.trades[next].quantity != e.Quantity {
					r.a.differ("feed", r.m.id, look, "the feed's trade event %d (trade %s, %d at %d) is not the trades' next after the one before it", e.Seq, e.TradeID, e.Quantity, e.Price)
					return nil
				}
				next++
			case feed.TypeLevel:
				side := 0
				if e.Side == "ask" {
					side = 1
				}
				if e.Price >= engine.MinPrice && e.Price <= engine.MaxPrice {
					levels[side][e.Price], seen[side][e.Price] = e.Quantity, true
				}
			case feed.TypeStatus:
				status = e.Status
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: reading the feed of market %s: %w", r.m.id, err)
	}
	if first == 0 {
		return nil // nothing kept
	}
	if next >= 0 && next != len(r.trades) {
		r.a.differ("feed", r.m.id, look, "the feed's last trade event is trade seq %d; Postgres holds trades to seq %d", r.trades[next-1].seq, r.trades[len(r.trades)-1].seq)
	}
	var d engine.Depth
	r.book.Depth(engine.Payout, &d)
	var book [2][engine.Payout]int64
	for _, l := range d.Yes.Bids {
		book[0][l.Price] = l.Quantity
	}
	for _, l := range d.Yes.Asks {
		book[1][l.Price] = l.Quantity
	}
	for side, name := range []string{"bid", "ask"} {
		for p := engine.MinPrice; p <= engine.MaxPrice; p++ {
			if (seen[side][p] || first == 1) && levels[side][p] != book[side][p] {
				r.a.differ("feed", r.m.id, look, "the feed leaves %d resting at the %s at YES price %d; the replayed book holds %d", levels[side][p], name, p, book[side][p])
			}
		}
	}
	if status != "" && status != r.m.status {
		r.a.differ("feed", r.m.id, look+" and its markets row", "the feed's last status is %s; the market is %s", status, r.m.status)
	}
	return nil
}

// feedJSON scans a feed batch's JSON (bytea) straight into its events.
type feedJSON struct{ events *[]feed.Event }

func (f *feedJSON) Scan(src any) error {
	b, ok := src.([]byte)
	if !ok {
		return fmt.Errorf("a feed batch of type %T", src)
	}
	events, err := feed.Decode(b)
	*f.events = events
	return err
}
