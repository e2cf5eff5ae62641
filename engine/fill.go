package engine

// Fill is one execution between the incoming order (the taker) and a resting order (the maker),
// at the maker's price.
type Fill struct {
	Taker    Leg
	Maker    Leg
	YesPrice int   // execution price in YES terms
	Quantity int64 // shares executed
	Kind     Kind
}

// Pairs is the change in YES/NO pairs outstanding: +Quantity for a mint, −Quantity for a burn.
// Each pair is backed by Payout cents of collateral.
func (f *Fill) Pairs() int64 {
	switch f.Kind {
	case Mint:
		return f.Quantity
	case Burn:
		return -f.Quantity
	}
	return 0
}

// Leg is one side of a fill: the order, its state after the fill, and the signed changes the fill
// makes to its account. Applying the four deltas of both legs to a ledger, and each leg's Fee to
// the exchange's account, is all the accounting a fill needs.
//
// A BUY leg spends its lock: CashLocked falls by what the order locked for quantity shares (its
// limit and the fee reserve of its role's rate, Order.Lock or OrderState.Lock), the account pays
// Price × quantity and Fee, and the rest — the surplus of price improvement, only ever a taker's,
// and what the reserve held beyond the fee — returns to Cash; Shares grow by quantity. A SELL leg
// gives up quantity locked shares and receives Price × quantity less Fee.
type Leg struct {
	Order   OrderID
	Account AccountID
	Side    Side
	Outcome Outcome
	Price   int   // execution price in this leg's outcome terms
	Filled  int64 // the order's cumulative filled quantity after this fill
	Status  Status

	Cash         int64 // change in available cash
	CashLocked   int64 // change in locked cash (≤ 0)
	Shares       int64 // change in shares of Outcome held, locked ones included
	SharesLocked int64 // change in locked shares of Outcome (≤ 0)
	Fee          int64 // what the leg paid the exchange (Fee of its role's rate): negative for a rebate
}

// Surplus is the cash a BUY gets back from its lock because it executed below its limit or paid
// less fee than its lock reserved.
func (l *Leg) Surplus() int64 {
	if l.Side == Buy {
		return l.Cash
	}
	return 0
}

// set fills in the leg of order o, whose filled count already includes this fill, executing q
// shares at YES price p as the side paying rate (its taker or maker rate).
func (l *Leg) set(o *order, p int, q int64, rate int) {
	l.Order = o.id
	l.Account = o.account
	l.Side = o.side
	l.Outcome = o.outcome
	e := yesPrice(o.outcome, p)
	l.Price = e
	l.Filled = o.filled
	l.Status = status(o.qty, o.filled, false)
	l.Fee = Fee(rate, e, q)
	if o.side == Buy {
		lock := int64(o.price) + feeReserve(rate, int(o.price))
		l.Cash = (lock-int64(e))*q - l.Fee
		l.CashLocked = -lock * q
		l.Shares = q
		l.SharesLocked = 0
		return
	}
	l.Cash = int64(e)*q - l.Fee
	l.CashLocked = 0
	l.Shares = -q
	l.SharesLocked = -q
}

// matchKind names the match between a bid (BUY YES or SELL NO) and an ask (SELL YES or BUY NO).
func matchKind(bidSide, askSide Side) Kind {
	switch {
	case bidSide == Buy && askSide == Sell:
		return TransferYes
	case bidSide == Buy:
		return Mint
	case askSide == Sell:
		return Burn
	default:
		return TransferNo
	}
}
