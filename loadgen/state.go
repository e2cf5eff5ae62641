package loadgen

// Response bodies, decoded (with goccy/go-json, run.go) into only the fields a bot needs.

// orderResp is an order as returned by POST /order, POST /cancel-order and, in an array,
// POST /cancel-everything.
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

type positionsResp struct {
	Positions []positionResp `json:"positions"`
}

type positionResp struct {
	MarketID       string `json:"marketId"`
	Outcome        string `json:"outcome"`
	Quantity       int64  `json:"quantity"`
	LockedQuantity int64  `json:"lockedQuantity"`
}

// openOrder is a resting order of the bot that it may cancel.
type openOrder struct {
	id      string
	market  int
	sell    bool
	outcome uint8
}

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
		s.remember(openOrder{id: r.ID, market: o.market, sell: o.sell, outcome: o.outcome})
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

// takeOpen removes and returns the i-th open order, to be cancelled.
func (s *botState) takeOpen(i int) openOrder {
	o := s.open[i]
	s.open = append(s.open[:i], s.open[i+1:]...)
	return o
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
	for i := range rs {
		r := &rs[i]
		m, ok := s.marketIndex[r.MarketID]
		out, ok2 := parseOutcome(r.Outcome)
		if !ok || !ok2 || r.Side != "SELL" {
			continue
		}
		s.add(m, out, max(0, r.Quantity-r.FilledQuantity))
	}
	s.open = s.open[:0]
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
