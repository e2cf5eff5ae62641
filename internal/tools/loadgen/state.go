package loadgen

import "slices"

// Response bodies, decoded (with goccy/go-json, run.go) into only the fields a bot needs.

// orderResp is an order as returned by POST /order, POST /order/amend, POST /cancel-order and, in
// arrays, POST /cancel-everything, POST /orders/batch and POST /orders/cancel.
type orderResp struct {
	ID             string      `json:"id"`
	MarketID       string      `json:"marketId"`
	Side           string      `json:"side"`
	Outcome        string      `json:"outcome"`
	Status         string      `json:"status"`
	Quantity       int64       `json:"quantity"`
	FilledQuantity int64       `json:"filledQuantity"`
	Trades         []tradeResp `json:"trades"`
}

type tradeResp struct {
	Quantity int64 `json:"quantity"`
}

// batchResp is the answer of POST /orders/batch: one result per placement, in request order, with
// the order when it was placed and the error's code when it was not.
type batchResp struct {
	Results []batchResult `json:"results"`
}

type batchResult struct {
	Status  int       `json:"status"`
	Order   orderResp `json:"order"`
	Details struct {
		Code string `json:"code"`
	} `json:"details"`
}

// cancelManyResp is the answer of POST /orders/cancel: the orders cancelled and those refused.
type cancelManyResp struct {
	Cancelled []orderResp     `json:"cancelled"`
	Errors    []cancelRefusal `json:"errors"`
}

type cancelRefusal struct {
	OrderID string `json:"orderId"`
	Details struct {
		Code string `json:"code"`
	} `json:"details"`
}

type positionsResp struct {
	Positions []positionResp `json:"positions"`
}

type positionResp struct {
	MarketID       string `json:"marketId"`
	Outcome        string `json:"outcome"`
	Quantity       int64  `json:"quantity"`
	LockedQuantity int64  `json:"lockedQuantity"`
}

// openOrder is a resting order of the bot that it may cancel or amend.
type openOrder struct {
	id       string
	market   int
	sell     bool
	outcome  uint8
	price    int   // in its own outcome's terms
	quantity int64 // the order's quantity as the exchange last answered it: filled + remaining
	// remaining is what was left to fill when the exchange last answered: an upper bound, since
	// other bots' orders may have filled it since.
	remaining int
}

// bid tells whether the order sits on the bid side of the YES book (BUY YES or SELL NO).
func (o *openOrder) bid() bool { return (o.outcome == outYes) != o.sell }

// botState is what a bot knows about its own account: the shares it can sell for sure and its
// recent open orders.
//
// The sellable counts are a lower bound of the truth, so a bot never sends a SELL it cannot cover:
// fills the bot sees in its own placement and cancel responses are counted, fills of its resting
// orders made by other bots are not, until the next GET /positions sets the counts to the exact
// unlocked quantities. When a response leaves the outcome unknown (a failed request, an order that
// is no longer open), the bot assumes the case that leaves it fewer shares.
type botState struct {
	marketIndex map[string]int // market id → index; shared, read-only
	avail       []int          // sellable shares, index market*2+outcome
	open        []openOrder    // most recent last, at most maxOpenTracked
}

func newBotState(marketIndex map[string]int) *botState {
	return &botState{marketIndex: marketIndex, avail: make([]int, 2*len(marketIndex))}
}

func (s *botState) available(market int, outcome uint8) int { return s.avail[2*market+int(outcome)] }

func (s *botState) add(market int, outcome uint8, n int64) {
	i := 2*market + int(outcome)
	s.avail[i] = max(0, s.avail[i]+int(n))
}

func parseOutcome(s string) (uint8, bool) {
	switch s {
	case "YES":
		return outYes, true
	case "NO":
		return outNo, true
	}
	return 0, false
}

func isOpenStatus(status string) bool { return status == "OPEN" || status == "PARTIALLY_FILLED" }

// placed applies an accepted placement: a BUY's filled shares become sellable, a SELL's shares
// are sold or locked; an order left resting becomes a cancel candidate.
func (s *botState) placed(o order, r *orderResp) {
	if o.sell {
		s.add(o.market, o.outcome, -int64(o.qty))
	} else {
		s.add(o.market, o.outcome, r.FilledQuantity)
	}
	if r.ID != "" && isOpenStatus(r.Status) {
		s.remember(openOrder{id: r.ID, market: o.market, sell: o.sell, outcome: o.outcome, price: o.price,
			quantity: int64(o.qty), remaining: max(0, o.qty-int(r.FilledQuantity))})
	}
}

// placeUnknown applies a placement whose fate is unknown (5xx, transport error): a SELL may have
// locked its shares, so they are taken as gone.
func (s *botState) placeUnknown(o order) {
	if o.sell {
		s.add(o.market, o.outcome, -int64(o.qty))
	}
}

// placeRejected applies a rejected placement: nothing changed on the server, but a SELL rejected
// for lack of shares means the bot's count was wrong, so it forgets those shares.
func (s *botState) placeRejected(o order, code string) {
	if o.sell && code == "insufficient_shares" {
		s.add(o.market, o.outcome, -int64(s.available(o.market, o.outcome)))
	}
}

func (s *botState) remember(o openOrder) {
	if len(s.open) == maxOpenTracked {
		copy(s.open, s.open[1:])
		s.open = s.open[:len(s.open)-1]
	}
	s.open = append(s.open, o)
}

// takeOpen removes and returns the i-th open order, to be cancelled or amended.
func (s *botState) takeOpen(i int) openOrder {
	o := s.open[i]
	s.open = append(s.open[:i], s.open[i+1:]...)
	return o
}

// takeOldest removes the n oldest open orders and appends them to into, to be cancelled.
func (s *botState) takeOldest(n int, into []openOrder) []openOrder {
	n = min(n, len(s.open))
	into = append(into, s.open[:n]...)
	s.open = append(s.open[:0], s.open[n:]...)
	return into
}

// forgetMarket drops the open orders of market m, all cancelled.
func (s *botState) forgetMarket(m int) {
	s.open = slices.DeleteFunc(s.open, func(o openOrder) bool { return o.market == m })
}

// amended applies an accepted amend of o (taken out of the open orders) to newPrice (0: unchanged),
// answered with r, the order as it then stands. A SELL locks its remaining shares: it releases
// what its quantity went down by, or locks what it went up by (an amend to more than the order
// still had), exactly, since the quantity is filled + remaining and fills do not change it. A BUY's
// fills at a crossing price are shares the bot now holds. Still resting, the order becomes the
// bot's newest; an order the amend left no longer resting (filled, or cancelled by self-trade
// prevention) gives back what it did not fill.
func (s *botState) amended(o openOrder, newPrice int, r *orderResp) {
	if o.sell {
		s.add(o.market, o.outcome, o.quantity-r.Quantity)
		if !isOpenStatus(r.Status) {
			s.add(o.market, o.outcome, max(0, r.Quantity-r.FilledQuantity))
		}
	} else {
		var bought int64
		for _, t := range r.Trades {
			bought += t.Quantity
		}
		s.add(o.market, o.outcome, bought)
	}
	if isOpenStatus(r.Status) {
		if newPrice != 0 {
			o.price = newPrice
		}
		o.quantity, o.remaining = r.Quantity, max(0, int(r.Quantity-r.FilledQuantity))
		s.remember(o)
	}
}

// amendRefused applies a refused amend of o: an order that is no longer resting (filled, or
// unknown) is forgotten; any other refusal left it as it was, so it stays a candidate.
func (s *botState) amendRefused(o openOrder, code string) {
	if code != "order_not_open" && code != "order_not_found" {
		s.remember(o)
	}
}

// amendUnknown applies an amend whose fate is unknown (5xx, transport error): the order is kept
// as it was, but a SELL amended to qty more shares than it had left may have locked them, so the
// bot takes qty shares as gone.
func (s *botState) amendUnknown(o openOrder, qty int) {
	if o.sell && qty > 0 {
		s.add(o.market, o.outcome, -int64(qty))
	}
	s.remember(o)
}

// cancelled applies a successful single cancel: a SELL's unfilled shares are unlocked again.
func (s *botState) cancelled(o openOrder, r *orderResp) {
	if o.sell {
		s.add(o.market, o.outcome, max(0, r.Quantity-r.FilledQuantity))
	}
}

// cancelledAll applies a successful cancel-everything: every cancelled SELL's unfilled shares are
// unlocked again and no order is open any more.
func (s *botState) cancelledAll(rs []orderResp) {
	s.cancelledMany(rs)
	s.open = s.open[:0]
}

// cancelledMany applies the cancelled orders of a successful cancel of several (orders the bot
// took out of its open ones, or all of a market's): every SELL's unfilled shares are unlocked again.
func (s *botState) cancelledMany(rs []orderResp) {
	for i := range rs {
		r := &rs[i]
		m, ok := s.marketIndex[r.MarketID]
		out, ok2 := parseOutcome(r.Outcome)
		if !ok || !ok2 || r.Side != "SELL" {
			continue
		}
		s.add(m, out, max(0, r.Quantity-r.FilledQuantity))
	}
}

// resync sets the sellable counts to the unlocked quantities the server reports.
func (s *botState) resync(ps []positionResp) {
	clear(s.avail)
	for _, p := range ps {
		m, ok := s.marketIndex[p.MarketID]
		out, ok2 := parseOutcome(p.Outcome)
		if ok && ok2 {
			s.avail[2*m+int(out)] = max(0, int(p.Quantity-p.LockedQuantity))
		}
	}
}
