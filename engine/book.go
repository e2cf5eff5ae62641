package engine

// Book is the order book of one market, in YES terms. Its zero value is not usable; call New.
type Book struct {
	bids, asks       [Payout]level // indexed by YES price; 0 is unused
	bidBits, askBits bitset

	// orders holds every resting order in a slot; freed slots are chained through next and reused,
	// so a book in steady state allocates nothing.
	orders []order
	free   int32
	index  idIndex // resting order id → slot, for O(1) cancel

	last int // last trade's YES price, 0 before the first trade
}

// Result is what a submission did. Callers keep one Result per market goroutine and pass it to
// every Submit: its slices are reused, so steady-state matching allocates nothing.
type Result struct {
	// Order is the submitted order's state afterwards: OPEN or PARTIALLY_FILLED when it rests,
	// FILLED when it does not.
	Order OrderState
	// Fills are the executions, in the order they happened.
	Fills []Fill
	// Cancelled are resting orders of the submitter's own account that the order would have
	// traded with; self-trade prevention cancelled them, and each releases its Lock.
	Cancelled []OrderState
}

// New returns an empty book with room for about capacity resting orders before it grows.
func New(capacity int) *Book {
	b := &Book{
		orders: make([]order, 0, capacity),
		free:   nilSlot,
		index:  newIDIndex(capacity),
	}
	for p := range b.bids {
		b.bids[p] = level{head: nilSlot, tail: nilSlot}
		b.asks[p] = level{head: nilSlot, tail: nilSlot}
	}
	return b
}

// Submit matches an order against the book and rests what remains of it. The caller has already
// reserved the order's Lock. On error nothing has changed.
func (b *Book) Submit(o Order, r *Result) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if b.index.get(o.ID) != nilSlot {
		return ErrDuplicateOrder
	}
	r.Fills = r.Fills[:0]
	r.Cancelled = r.Cancelled[:0]
	var t order
	t.id, t.account, t.qty = o.ID, o.Account, o.Quantity
	t.price, t.side, t.outcome = uint8(o.BookPrice()), o.Side, o.Outcome
	if o.IsBid() {
		limit := int(t.price)
		for t.filled < t.qty {
			p := b.askBits.next(0)
			if p > limit {
				break
			}
			b.match(&t, &b.asks[p], &b.askBits, p, r)
		}
	} else {
		limit := int(t.price)
		for t.filled < t.qty {
			p := b.bidBits.prev(Payout)
			if p < limit {
				break
			}
			b.match(&t, &b.bids[p], &b.bidBits, p, r)
		}
	}
	if t.filled < t.qty {
		b.rest(&t)
	}
	// Field by field: a composite literal here compiles to a zeroed temporary whose overlapping
	// copies stall store forwarding, measurably on this path.
	r.Order.Order = o
	r.Order.Filled = t.filled
	r.Order.Status = status(t.qty, t.filled, false)
	return nil
}

// match trades the taker t against the level lv at YES price p, oldest order first, until one of
// them is exhausted.
func (b *Book) match(t *order, lv *level, bits *bitset, p int, r *Result) {
	for t.filled < t.qty && lv.head != nilSlot {
		s := lv.head
		m := &b.orders[s]
		if m.account == t.account {
			r.Cancelled = append(r.Cancelled, m.state(true))
			b.remove(lv, bits, p, s)
			continue
		}
		q := min(t.qty-t.filled, m.qty-m.filled)
		t.filled += q
		m.filled += q
		lv.total -= q
		r.Fills = append(r.Fills, Fill{YesPrice: p, Quantity: q})
		f := &r.Fills[len(r.Fills)-1]
		f.Taker.set(t, p, q)
		f.Maker.set(m, p, q)
		if bits == &b.askBits { // the taker is the bid
			f.Kind = matchKind(t.side, m.side)
		} else {
			f.Kind = matchKind(m.side, t.side)
		}
		b.last = p
		if m.filled == m.qty {
			b.remove(lv, bits, p, s)
		}
	}
}

// rest appends the order to the tail of its level.
func (b *Book) rest(t *order) {
	s := b.free
	if s == nilSlot {
		s = int32(len(b.orders))
		b.orders = append(b.orders, order{})
	} else {
		b.free = b.orders[s].next
	}
	lv, bits := b.sideOf(t)
	p := int(t.price)
	o := &b.orders[s]
	*o = *t
	o.prev, o.next = lv.tail, nilSlot
	if lv.tail == nilSlot {
		lv.head = s
		bits.set(p)
	} else {
		b.orders[lv.tail].next = s
	}
	lv.tail = s
	lv.total += t.remaining()
	b.index.put(t.id, s)
}

// remove unlinks slot s from its level lv at price p and frees it.
func (b *Book) remove(lv *level, bits *bitset, p int, s int32) {
	o := &b.orders[s]
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
		bits.clear(p)
	}
	b.index.del(o.id)
	o.next = b.free
	b.free = s
}

func (b *Book) sideOf(o *order) (*level, *bitset) {
	if isBid(o.side, o.outcome) {
		return &b.bids[o.price], &b.bidBits
	}
	return &b.asks[o.price], &b.askBits
}

// Cancel removes a resting order and returns its final state; its Lock is what the cancel releases.
func (b *Book) Cancel(id OrderID) (OrderState, error) {
	s := b.index.get(id)
	if s == nilSlot {
		return OrderState{}, ErrUnknownOrder
	}
	return b.cancelSlot(s), nil
}

func (b *Book) cancelSlot(s int32) OrderState {
	o := &b.orders[s]
	st := o.state(true)
	lv, bits := b.sideOf(o)
	b.remove(lv, bits, int(o.price), s)
	return st
}

// CancelAccount cancels every resting order of one account, appending their final states to dst:
// bids from the best price down, then asks from the best price up, oldest first within a price.
func (b *Book) CancelAccount(account AccountID, dst []OrderState) []OrderState {
	for p := b.bidBits.prev(Payout); p > 0; p = b.bidBits.prev(p) {
		dst = b.cancelLevel(&b.bids[p], account, dst)
	}
	for p := b.askBits.next(0); p < Payout; p = b.askBits.next(p) {
		dst = b.cancelLevel(&b.asks[p], account, dst)
	}
	return dst
}

func (b *Book) cancelLevel(lv *level, account AccountID, dst []OrderState) []OrderState {
	for s := lv.head; s != nilSlot; {
		next := b.orders[s].next
		if b.orders[s].account == account {
			dst = append(dst, b.cancelSlot(s))
		}
		s = next
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
	for p := b.bidBits.prev(Payout); p > 0; p = b.bidBits.prev(p) {
		for s := b.bids[p].head; s != nilSlot; s = b.orders[s].next {
			dst = append(dst, b.orders[s].state(false))
		}
	}
	for p := b.askBits.next(0); p < Payout; p = b.askBits.next(p) {
		for s := b.asks[p].head; s != nilSlot; s = b.orders[s].next {
			dst = append(dst, b.orders[s].state(false))
		}
	}
	return dst
}

// Len is the number of resting orders.
func (b *Book) Len() int { return b.index.n }

// BestBid is the highest YES bid price, or 0 when there are no bids.
func (b *Book) BestBid() int { return b.bidBits.prev(Payout) }

// BestAsk is the lowest YES ask price, or 100 when there are no asks.
func (b *Book) BestAsk() int { return b.askBits.next(0) }

// LastTradePrice is the YES price of the most recent fill, or 0 when there has been none.
func (b *Book) LastTradePrice() int { return b.last }

// Rebuild returns a book holding exactly the given resting orders, as a service restores a market
// from its database: orders oldest first (their time priority), each with its Filled quantity, and
// the YES price of the market's last trade (0 if none). It fails on an invalid or duplicate order,
// one with nothing left to fill, or orders that would cross.
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
		if b.index.get(o.ID) != nilSlot {
			return nil, ErrDuplicateOrder
		}
		b.rest(&order{
			id:      o.ID,
			account: o.Account,
			qty:     o.Quantity,
			filled:  o.Filled,
			price:   uint8(o.BookPrice()),
			side:    o.Side,
			outcome: o.Outcome,
		})
	}
	if b.BestBid() >= b.BestAsk() {
		return nil, ErrCrossedBook
	}
	b.last = lastTrade
	return b, nil
}
