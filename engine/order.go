package engine

// Order is a limit order as submitted, priced in its own outcome's terms.
type Order struct {
	ID      OrderID
	Account AccountID
	Side    Side
	Outcome Outcome
	// The one-byte fields sit together.
	TimeInForce TimeInForce
	PostOnly    bool // rest without trading, or be refused: only for an order that rests (GTC, GTD)
	SelfTrade   SelfTrade
	Price       int   // cents, MinPrice..MaxPrice, in Outcome's terms
	Quantity    int64 // shares, 1..MaxQuantity
	Fees        Fees  // the schedule its fills pay (see Fees); the zero Fees for none
}

// Validate checks an order's fields, returning the first rule it breaks.
func (o *Order) Validate() error {
	switch {
	case o.Side != Buy && o.Side != Sell:
		return ErrInvalidSide
	case o.Outcome != Yes && o.Outcome != No:
		return ErrInvalidOutcome
	case o.Price < MinPrice || o.Price > MaxPrice:
		return ErrInvalidPrice
	case o.Quantity <= 0 || o.Quantity > MaxQuantity:
		return ErrInvalidQuantity
	case o.TimeInForce > FOK:
		return ErrInvalidTimeInForce
	case o.SelfTrade > CancelIncoming:
		return ErrInvalidSelfTrade
	case o.PostOnly && !o.TimeInForce.Rests():
		return ErrPostOnlyMustRest
	}
	return o.Fees.Validate()
}

// IsBid reports whether the order sits on the bid side of the YES book: BUY YES and SELL NO do.
func (o *Order) IsBid() bool { return sideOf(o.Side, o.Outcome) == bidSide }

// BookPrice is the order's price in YES terms, where it sits in the book.
func (o *Order) BookPrice() int { return yesPrice(o.Outcome, o.Price) }

// Lock is what the caller must reserve before submitting the order: for a BUY, price × quantity
// cents and the most its taker fee can be (feeReserve of Fees.Taker per share); quantity shares
// of the outcome for a SELL, whose fee comes out of what it is paid. An IOC or FOK order needs it
// all too, since it may fill entirely; what it leaves unfilled comes back as Result says.
func (o *Order) Lock() (cash, shares int64) {
	if o.Side == Buy {
		return (int64(o.Price) + feeReserve(o.Fees.Taker, o.Price)) * o.Quantity, 0
	}
	return 0, o.Quantity
}

// OrderState is an order together with how much of it has filled and its status.
type OrderState struct {
	Order
	Filled int64
	Status Status
}

// Remaining is the unfilled quantity.
func (s *OrderState) Remaining() int64 { return s.Quantity - s.Filled }

// Lock is what the order's unfilled remainder holds locked while it rests, and so what a cancel
// releases: for a BUY, price × remaining cents and the most its maker fee can be (feeReserve of
// Fees.Maker per share); remaining shares for a SELL.
func (s *OrderState) Lock() (cash, shares int64) {
	if s.Side == Buy {
		return (int64(s.Price) + feeReserve(s.Fees.Maker, s.Price)) * s.Remaining(), 0
	}
	return 0, s.Remaining()
}

// TakerLock is what the order's unfilled remainder holds locked right after a Submit or an Amend,
// where it was the taker: the remainder's share of the Lock reserved for it (Order.Lock, or the
// resting lock plus AmendLock), taker fee included. The caller releases TakerLock − Lock when the
// order rests (a maker's fee is never more than a taker's), and all of TakerLock when it does not.
func (s *OrderState) TakerLock() (cash, shares int64) {
	if s.Side == Buy {
		return (int64(s.Price) + feeReserve(s.Fees.Taker, s.Price)) * s.Remaining(), 0
	}
	return 0, s.Remaining()
}

// AmendKeepsPriority reports whether amending the resting order s to price and remaining keeps its
// place in its level's queue (Book.Amend): at the same price with no more remaining it does, since
// it asks for nothing the orders behind it wait for; any other amend sends it to the back.
func (s *OrderState) AmendKeepsPriority(price int, remaining int64) bool {
	return keepsPriority(s.Price, s.Remaining(), price, remaining)
}

func keepsPriority(oldPrice int, oldRemaining int64, price int, remaining int64) bool {
	return price == oldPrice && remaining <= oldRemaining
}

// AmendLock is the signed change in what the resting order s locks when amended to price and
// remaining (see Book.Amend): the caller reserves it before Amend when positive and releases it
// when negative. It is the lock of the amended order as a taker (an amend that crosses trades as
// one, paying its taker fee) less s's Lock; after Amend the caller settles the Result as after a
// Submit, which gives back what the order locks beyond its Lock if it rests.
func (s *OrderState) AmendLock(price int, remaining int64) (cash, shares int64) {
	if s.Side == Buy {
		return (int64(price)+feeReserve(s.Fees.Taker, price))*remaining - (int64(s.Price)+feeReserve(s.Fees.Maker, s.Price))*s.Remaining(), 0
	}
	return 0, remaining - s.Remaining()
}

// yesPrice converts a price in outcome terms to YES terms; the conversion is its own inverse.
func yesPrice(outcome Outcome, price int) int {
	if outcome == Yes {
		return price
	}
	return Payout - price
}

// status derives an order's status from its fill and whether it was cancelled.
func status(quantity, filled int64, cancelled bool) Status {
	switch {
	case filled == quantity:
		return StatusFilled
	case cancelled && filled == 0:
		return StatusCancelled
	case cancelled:
		return StatusPartiallyFilledCancelled
	case filled == 0:
		return StatusOpen
	default:
		return StatusPartiallyFilled
	}
}
