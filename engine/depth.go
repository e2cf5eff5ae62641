package engine

// Level is one price level of a depth snapshot.
type Level struct {
	Price    int   `json:"price"`    // cents, in the view's outcome terms
	Quantity int64 `json:"quantity"` // unfilled quantity resting at this price
	Total    int64 `json:"total"`    // cumulative quantity from the best price to this level, inclusive
}

// View is the book as one outcome's traders see it.
type View struct {
	Bids           []Level // best (highest) price first
	Asks           []Level // best (lowest) price first
	LastTradePrice int     // in this outcome's terms; 0 when there has been no trade
}

// Depth is a snapshot of both views of a book. The NO view is the exact mirror of the YES view:
// NO bids are YES asks at 100 − p and NO asks are YES bids at 100 − p.
type Depth struct {
	Yes, No View
}

// Depth writes the best n levels of each side into d, reusing d's slices.
func (b *Book) Depth(n int, d *Depth) {
	d.Yes.Bids = b.view(d.Yes.Bids[:0], bidSide, n)
	d.Yes.Asks = b.view(d.Yes.Asks[:0], askSide, n)
	d.No.Bids = mirror(d.No.Bids[:0], d.Yes.Asks)
	d.No.Asks = mirror(d.No.Asks[:0], d.Yes.Bids)
	d.Yes.LastTradePrice = b.last
	d.No.LastTradePrice = 0
	if b.last != 0 {
		d.No.LastTradePrice = Payout - b.last
	}
}

func mirror(dst, src []Level) []Level {
	for _, l := range src {
		dst = append(dst, Level{Price: Payout - l.Price, Quantity: l.Quantity, Total: l.Total})
	}
	return dst
}

// view appends the best n levels of one side, priced in YES terms, with cumulative totals.
func (b *Book) view(dst []Level, side, n int) []Level {
	bs := &b.sides[side]
	var total int64
	for k := bs.bits.best(); k > 0 && len(dst) < n; k = bs.bits.prev(k) {
		q := bs.levels[k].total
		total += q
		dst = append(dst, Level{Price: yes(side, k), Quantity: q, Total: total})
	}
	return dst
}
