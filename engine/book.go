package engine

// Book is the order book of one market. Its zero value is not usable; call New.
//
// The book keeps its two sides symmetric. Each resting order sits at a key, its price in a buyer's
// terms: its own price for a BUY, 100 − its price for a SELL. On the bid side (BUY YES, SELL NO) the
// key is the YES price; on the ask side (SELL YES, BUY NO) it is 100 − the YES price. On both sides
// the best level is then the highest key, and a taker with key k crosses a resting level with key m
// exactly when k + m ≥ 100 — one matching loop serves both sides without a branch on the side.
type Book struct {
	sides [2]bookSide // bid, ask

	// orders holds every resting order in a slot; freed slots are chained through next and reused,
	// so a book in steady state allocates nothing.
	orders []order
	free   int32
	index  idIndex // resting order id → slot, for O(1) cancel
	open   idIndex // resting orders per account (the index's slot is the count), for OpenOrders

	last int // last trade's YES price, 0 before the first trade
}

// Sides of the book, as indexes into Book.sides.
const (
	bidSide = 0
	askSide = 1
)

// bookSide is one side of the book: 99 FIFO levels indexed by key, and a bitmap of the non-empty
// ones so that the best level is one bit operation away.
type bookSide struct {
	levels [Payout]level // index 0 unused
	bits   bitset
}

// yes converts a key on this side to a YES price (and back: the conversion is its own inverse).
func yes(side, key int) int { return key + side*(Payout-2*key) }

// sideOf is bidSide for BUY YES and SELL NO, askSide for SELL YES and BUY NO.
func sideOf(s Side, o Outcome) int { return int(s-Buy) ^ int(o-Yes) }

// keyOf is an order's key: its price in a buyer's terms.
func keyOf(s Side, price int) int {
	if s == Buy {
		return price
	}
	return Payout - price
}

// Result is what a submission or an amend did. Callers keep one Result per market goroutine and
// pass it to every Submit and Amend: its slices are reused, so steady-state matching allocates
// nothing.
//
// To settle it the caller applies each fill's two legs (and pays the exchange each leg's Fee),
// releases the Lock of each Cancelled order, and releases what Order's remainder holds beyond what
// it locks from now on: its TakerLock less its Lock when it rests, all of its TakerLock when it
// does not (nothing when it FILLED).
type Result struct {
	// Order is the order's state afterwards: OPEN or PARTIALLY_FILLED when it rests, FILLED when it
	// filled, CANCELLED or PARTIALLY_FILLED_CANCELLED when the engine cancelled its remainder.
	Order OrderState
	// Reason is why the engine cancelled Order's remainder — ReasonIOC, ReasonFOK or
	// ReasonSelfTrade (CancelIncoming) — and ReasonNone when it did not.
	Reason CancelReason
	// Fills are the executions, in the order they happened.
	Fills []Fill
	// Cancelled are resting orders of the order's own account that it would have traded with;
	// self-trade prevention (CancelResting) cancelled them, reason SELF_TRADE, and each releases its
	// Lock.
	Cancelled []OrderState
}

// New returns an empty book with room for about capacity resting orders before it grows.
func New(capacity int) *Book {
	b := &Book{
		orders: make([]order, 0, capacity),
		free:   nilSlot,
		index:  newIDIndex(capacity),
		open:   newIDIndex(16),
	}
	for s := range b.sides {
		for k := range b.sides[s].levels {
			b.sides[s].levels[k] = level{head: nilSlot, tail: nilSlot}
		}
	}
	return b
}

// Submit matches an order against the book and rests what remains of it, as its time in force
// allows. The caller has already reserved the order's Lock. On error nothing has changed: that
// includes ErrPostOnlyWouldCross, while a FOK order that cannot fill entirely is not an error but
// a Result with Order CANCELLED, reason FOK, and no other effect.
//
// A post-only order is refused if it would meet any resting order, its own account's included:
// under CancelResting it would cancel its owner's orders and under CancelIncoming it would be
// cancelled itself, and a post-only order promises to join the book without changing it.
//
// Submit inlines into its caller and passes the order on by pointer: an Order has more fields
// than Go passes in registers, and copying it to the stack for the call cost a sixth of a
// submission in BenchmarkRealisticStream.
func (b *Book) Submit(o Order, r *Result) error { return b.submit(&o, r) }

func (b *Book) submit(o *Order, r *Result) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if b.index.get(o.ID) != nilSlot {
		return ErrDuplicateOrder
	}
	var t order
	t.id, t.account, t.qty = o.ID, o.Account, o.Quantity
	t.side, t.outcome, t.price, t.key = o.Side, o.Outcome, uint8(o.Price), uint8(keyOf(o.Side, o.Price))
	t.tif, t.postOnly, t.stp = o.TimeInForce, o.PostOnly, o.SelfTrade
	t.taker, t.maker = int16(o.Fees.Taker), int16(o.Fees.Maker) // Validate bounds them
	own := sideOf(o.Side, o.Outcome)
	opp := &b.sides[own^1]
	if o.PostOnly || o.TimeInForce == FOK { // rare: checks that must precede any change
		if o.PostOnly && opp.bits.best()+int(t.key) >= Payout {
			return ErrPostOnlyWouldCross
		}
		if o.TimeInForce == FOK && !b.fills(&t, own^1) {
			r.Fills = r.Fills[:0]
			r.Cancelled = r.Cancelled[:0]
			r.Order = OrderState{Order: *o, Status: StatusCancelled}
			r.Reason = ReasonFOK
			return nil
		}
	}
	r.Fills = r.Fills[:0]
	r.Cancelled = r.Cancelled[:0]
	// The loop of execute, inline: calling it cost about 5% of a submission's instructions.
	reason := ReasonNone
	for t.filled < t.qty {
		m := opp.bits.best()
		if m+int(t.key) < Payout {
			break
		}
		if b.match(&t, opp, own^1, m, r) {
			reason = ReasonSelfTrade
			break
		}
	}
	if reason == ReasonNone && t.filled < t.qty {
		if t.tif.Rests() {
			b.rest(&t, &b.sides[own])
		} else {
			reason = cancelledBy(t.tif)
		}
	}
	// Field by field: a composite literal here compiles to a zeroed temporary whose overlapping
	// copies stall store forwarding, measurably on this path, and a copy of *o reads the caller's
	// fresh stores with wider loads, which stalls the same way.
	r.Order.ID, r.Order.Account, r.Order.Price, r.Order.Quantity = o.ID, o.Account, o.Price, o.Quantity
	r.Order.Side, r.Order.Outcome = o.Side, o.Outcome
	r.Order.TimeInForce, r.Order.PostOnly, r.Order.SelfTrade = o.TimeInForce, o.PostOnly, o.SelfTrade
	r.Order.Fees = o.Fees
	r.Order.Filled = t.filled
	r.Order.Status = status(t.qty, t.filled, reason != ReasonNone)
	r.Reason = reason
	return nil
}

// execute matches the taker t, whose side of the book is own, against the other side, then rests
// what remains of it or cancels that as its time in force and self-trade mode say. It returns why it
// cancelled the remainder, or ReasonNone.
func (b *Book) execute(t *order, own int, r *Result) CancelReason {
	opp := &b.sides[own^1]
	for t.filled < t.qty {
		m := opp.bits.best()
		if m+int(t.key) < Payout {
			break
		}
		if b.match(t, opp, own^1, m, r) {
			return ReasonSelfTrade
		}
	}
	if t.filled < t.qty {
		if !t.tif.Rests() {
			return cancelledBy(t.tif)
		}
		b.rest(t, &b.sides[own])
	}
	return ReasonNone
}

// cancelledBy is the reason an order that may not rest, IOC or FOK, has its remainder cancelled.
// A FOK order has none: Submit lets one match only when it fills entirely.
func cancelledBy(tif TimeInForce) CancelReason {
	if tif == FOK {
		return ReasonFOK
	}
	return ReasonIOC
}

// match trades the taker t against the level with key k on side bs (index side), oldest order
// first, until one of them is exhausted. It reports true when it stopped at an order of t's own
// account under CancelIncoming, which ends t's matching.
func (b *Book) match(t *order, bs *bookSide, side, k int, r *Result) bool {
	lv := &bs.levels[k]
	p := yes(side, k)
	for t.filled < t.qty && lv.head != nilSlot {
		s := lv.head
		m := &b.orders[s]
		if m.account == t.account {
			if t.stp == CancelIncoming {
				return true
			}
			r.Cancelled = append(r.Cancelled, m.state(true))
			b.remove(bs, s)
			continue
		}
		q := min(t.qty-t.filled, m.qty-m.filled)
		t.filled += q
		m.filled += q
		lv.total -= q
		r.Fills = append(r.Fills, Fill{YesPrice: p, Quantity: q})
		f := &r.Fills[len(r.Fills)-1]
		f.Taker.set(t, p, q, int(t.taker))
		f.Maker.set(m, p, q, int(m.maker))
		if f.Maker.Fee < -f.Taker.Fee { // a rebate is paid out of the taker's fee of the same fill
			f.Maker.Cash -= -f.Taker.Fee - f.Maker.Fee
			f.Maker.Fee = -f.Taker.Fee
		}
		if side == askSide { // the taker is the bid
			f.Kind = matchKind(t.side, m.side)
		} else {
			f.Kind = matchKind(m.side, t.side)
		}
		b.last = p
		if m.filled == m.qty {
			b.remove(bs, s)
		}
	}
	return false
}

// fills reports whether the taker t would fill entirely against side side of the book now, as
// Submit would match it, without changing anything. Own orders fill nothing: under CancelResting
// they are passed over (matching cancels them), under CancelIncoming they end the count.
func (b *Book) fills(t *order, side int) bool {
	bs := &b.sides[side]
	// The levels' totals bound what can fill: when even they fall short, as for a FOK order that
	// is killed, no order need be looked at.
	var q int64
	for k := bs.bits.best(); k > 0 && k+int(t.key) >= Payout && q < t.qty; k = bs.bits.prev(k) {
		q += bs.levels[k].total
	}
	if q < t.qty {
		return false
	}
	q = 0
	for k := bs.bits.best(); k > 0 && k+int(t.key) >= Payout; k = bs.bits.prev(k) {
		for s := bs.levels[k].head; s != nilSlot; s = b.orders[s].next {
			m := &b.orders[s]
			if m.account == t.account {
				if t.stp == CancelIncoming {
					return false
				}
				continue
			}
			if q += m.remaining(); q >= t.qty {
				return true
			}
		}
	}
	return false
}

// rest appends the order to the tail of its level on side bs.
func (b *Book) rest(t *order, bs *bookSide) {
	s := b.free
	if s == nilSlot {
		s = int32(len(b.orders))
		b.orders = append(b.orders, order{})
	} else {
		b.free = b.orders[s].next
	}
	k := int(t.key)
	lv := &bs.levels[k]
	o := &b.orders[s]
	*o = *t
	o.prev, o.next = lv.tail, nilSlot
	if lv.tail == nilSlot {
		lv.head = s
		bs.bits.set(k)
	} else {
		b.orders[lv.tail].next = s
	}
	lv.tail = s
	lv.total += t.remaining()
	b.index.put(t.id, s)
	b.open.add(OrderID(t.account), 1)
}

// remove unlinks slot s from its level on side bs and frees it.
func (b *Book) remove(bs *bookSide, s int32) {
	o := &b.orders[s]
	lv := &bs.levels[o.key]
	if o.prev == nilSlot {
		lv.head = o.next
	} else {
		b.orders[o.prev].next = o.next
	}
	if o.next == nilSlot {
		lv.tail = o.prev
	} else {
		b.orders[o.next].prev = o.prev
	}
	lv.total -= o.remaining()
	if lv.head == nilSlot {
		bs.bits.clear(int(o.key))
	}
	b.index.del(o.id)
	b.open.add(OrderID(o.account), -1)
	o.next = b.free
	b.free = s
}

// Amend changes a resting order's price, in its own outcome's terms, and remaining quantity in one
// step: the order is never out of the book in between. It keeps its id, time in force, post-only
// flag and self-trade mode, and its Quantity becomes Filled + remaining. On error nothing has
// changed.
//
// At the same price with no more remaining the order keeps its place in its level's queue, since
// it asks for nothing that the orders behind it are waiting for; any other change sends it to the
// back of its (new) level, as a new order. A new price that crosses trades at once, the order as
// taker under its own self-trade mode, and r reports that as it does a Submit; a post-only order is
// refused with ErrPostOnlyWouldCross instead. The same price and remaining change nothing.
//
// Locks: before calling, the caller reserves the order's AmendLock when it is positive (undoing that
// if Amend fails) and releases it when it is negative; then it settles r as after a Submit.
func (b *Book) Amend(id OrderID, price int, remaining int64, r *Result) error {
	if price < MinPrice || price > MaxPrice {
		return ErrInvalidPrice
	}
	s := b.index.get(id)
	if s == nilSlot {
		return ErrUnknownOrder
	}
	o := &b.orders[s]
	if remaining <= 0 || remaining > MaxQuantity-o.filled {
		return ErrInvalidQuantity
	}
	own := sideOf(o.side, o.outcome)
	key := keyOf(o.side, price)
	if o.postOnly && b.sides[own^1].bits.best()+key >= Payout {
		return ErrPostOnlyWouldCross
	}
	r.Fills = r.Fills[:0]
	r.Cancelled = r.Cancelled[:0]
	r.Reason = ReasonNone
	if keepsPriority(int(o.price), o.remaining(), price, remaining) { // in place
		b.sides[own].levels[o.key].total -= o.remaining() - remaining
		o.qty = o.filled + remaining
		r.Order = o.state(false)
		return nil
	}
	t := *o
	b.remove(&b.sides[own], s)
	t.price, t.key, t.qty = uint8(price), uint8(key), t.filled+remaining
	r.Reason = b.execute(&t, own, r)
	r.Order = t.state(r.Reason != ReasonNone)
	return nil
}

// Cancel removes a resting order and returns its final state; its Lock is what the cancel releases.
func (b *Book) Cancel(id OrderID) (st OrderState, err error) {
	s := b.index.get(id)
	if s == nilSlot {
		return st, ErrUnknownOrder
	}
	o := &b.orders[s]
	st = o.state(true)
	b.remove(&b.sides[sideOf(o.side, o.outcome)], s)
	return st, nil
}

// CancelAccount cancels every resting order of one account, appending their final states to dst:
// bids from the best price down, then asks from the best price up, oldest first within a price.
func (b *Book) CancelAccount(account AccountID, dst []OrderState) []OrderState {
	for side := range b.sides {
		bs := &b.sides[side]
		for k := bs.bits.best(); k > 0; k = bs.bits.prev(k) {
			for s := bs.levels[k].head; s != nilSlot; {
				next := b.orders[s].next
				if b.orders[s].account == account {
					dst = append(dst, b.orders[s].state(true))
					b.remove(bs, s)
				}
				s = next
			}
		}
	}
	return dst
}

// Order returns the state of a resting order.
func (b *Book) Order(id OrderID) (OrderState, bool) {
	s := b.index.get(id)
	if s == nilSlot {
		return OrderState{}, false
	}
	return b.orders[s].state(false), true
}

// Resting appends every resting order to dst: bids from the best price down, then asks from the
// best price up, oldest first within a price. Passing the result to Rebuild gives an equal book.
func (b *Book) Resting(dst []OrderState) []OrderState {
	for side := range b.sides {
		bs := &b.sides[side]
		for k := bs.bits.best(); k > 0; k = bs.bits.prev(k) {
			for s := bs.levels[k].head; s != nilSlot; s = b.orders[s].next {
				dst = append(dst, b.orders[s].state(false))
			}
		}
	}
	return dst
}

// OpenOrders is the number of resting orders of one account.
func (b *Book) OpenOrders(account AccountID) int { return max(int(b.open.get(OrderID(account))), 0) }

// Len is the number of resting orders.
func (b *Book) Len() int { return b.index.n }

// BestBid is the highest YES bid price, or 0 when there are no bids.
func (b *Book) BestBid() int { return b.sides[bidSide].bits.best() }

// BestAsk is the lowest YES ask price, or 100 when there are no asks.
func (b *Book) BestAsk() int { return Payout - b.sides[askSide].bits.best() }

// LastTradePrice is the YES price of the most recent fill, or 0 when there has been none.
func (b *Book) LastTradePrice() int { return b.last }

// Rebuild returns a book holding exactly the given resting orders, as a service restores a market
// from its database: orders oldest first (their time priority), each with its Filled quantity, and
// the YES price of the market's last trade (0 if none). It fails on an invalid or duplicate order,
// one with nothing left to fill or a time in force that never rests, or orders that would cross.
func Rebuild(orders []OrderState, lastTrade int) (*Book, error) {
	if lastTrade != 0 && (lastTrade < MinPrice || lastTrade > MaxPrice) {
		return nil, ErrInvalidPrice
	}
	b := New(max(len(orders), 64))
	for i := range orders {
		o := &orders[i]
		if err := o.Validate(); err != nil {
			return nil, err
		}
		if o.Filled < 0 || o.Filled >= o.Quantity {
			return nil, ErrInvalidQuantity
		}
		if !o.TimeInForce.Rests() {
			return nil, ErrInvalidTimeInForce
		}
		if b.index.get(o.ID) != nilSlot {
			return nil, ErrDuplicateOrder
		}
		b.rest(&order{
			id:       o.ID,
			account:  o.Account,
			qty:      o.Quantity,
			filled:   o.Filled,
			price:    uint8(o.Price),
			key:      uint8(keyOf(o.Side, o.Price)),
			side:     o.Side,
			outcome:  o.Outcome,
			tif:      o.TimeInForce,
			postOnly: o.PostOnly,
			stp:      o.SelfTrade,
			taker:    int16(o.Fees.Taker),
			maker:    int16(o.Fees.Maker),
		}, &b.sides[sideOf(o.Side, o.Outcome)])
	}
	if b.sides[bidSide].bits.best()+b.sides[askSide].bits.best() >= Payout {
		return nil, ErrCrossedBook
	}
	b.last = lastTrade
	return b, nil
}

// QueuePosition is where a resting order stands in its level's queue: the unfilled shares of the
// orders ahead of it at its price (time priority) and the unfilled shares of the whole level, its
// own included. YES and NO orders share a level (a NO bid at X rests beside YES asks at 100 − X),
// and shares are shares in either outcome, so both numbers are in the order's own terms already.
type QueuePosition struct {
	Ahead int64
	Level int64
}

// QueuePosition answers where the resting order id stands in its level, and false when it does not
// rest. A level keeps its total but not each order's rank, so the answer is a walk of the level's
// list: from the order towards both ends at once, one step each way in turn, until one end is
// reached — the shares ahead are then the sum walked towards the head, or the level's total less
// the order's own and the sum walked towards the tail. That is O(min(orders ahead, orders behind)),
// at most half the level's length; the level is bounded only by the book's resting orders (each
// account's by the shard's limit on open orders per market). It allocates nothing.
func (b *Book) QueuePosition(id OrderID) (QueuePosition, bool) {
	s := b.index.get(id)
	if s == nilSlot {
		return QueuePosition{}, false
	}
	o := &b.orders[s]
	total := b.sides[sideOf(o.side, o.outcome)].levels[o.key].total
	var ahead, behind int64
	for p, n := o.prev, o.next; ; p, n = b.orders[p].prev, b.orders[n].next {
		if p == nilSlot {
			return QueuePosition{Ahead: ahead, Level: total}, true
		}
		if n == nilSlot {
			return QueuePosition{Ahead: total - o.remaining() - behind, Level: total}, true
		}
		ahead += b.orders[p].remaining()
		behind += b.orders[n].remaining()
	}
}
