package engine

// nilSlot marks the end of a list of order slots.
const nilSlot int32 = -1

// level is the FIFO queue of resting orders at one price on one side: a doubly linked list
// threaded through the book's order slots, so that any order leaves it in O(1).
type level struct {
	head, tail int32
	total      int64 // unfilled quantity resting at this price
}

// order is a resting (or incoming) order as the book keeps it.
type order struct {
	id         OrderID
	account    AccountID
	qty        int64
	filled     int64
	prev, next int32
	price      uint8 // limit, in the order's own outcome terms
	key        uint8 // its level: the price in a buyer's terms (see Book)
	side       Side
	outcome    Outcome
	tif        TimeInForce
	postOnly   bool      // kept for Amend, which refuses to make a post-only order cross
	stp        SelfTrade // kept for Amend, whose repriced order may take
	taker      int16     // Fees.Taker, basis points
	maker      int16     // Fees.Maker, basis points
}

func (o *order) remaining() int64 { return o.qty - o.filled }

func (o *order) state(cancelled bool) OrderState {
	return OrderState{
		Order: Order{
			ID:          o.id,
			Account:     o.account,
			Side:        o.side,
			Outcome:     o.outcome,
			TimeInForce: o.tif,
			PostOnly:    o.postOnly,
			SelfTrade:   o.stp,
			Price:       int(o.price),
			Quantity:    o.qty,
			Fees:        Fees{Taker: int(o.taker), Maker: int(o.maker)},
		},
		Filled: o.filled,
		Status: status(o.qty, o.filled, cancelled),
	}
}
