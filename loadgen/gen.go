package loadgen

import (
	"math/rand/v2"
	"sync/atomic"
)

// The mix of a bot's steps. Per step: with probability 1/cancelAllEvery a cancel-everything;
// otherwise placePct % placements, cancelPct % cancels of one of the bot's recent open orders
// (a placement when it has none) and the rest reads, split evenly between the order book, the
// recent trades and the bot's positions.
const (
	placePct       = 70
	cancelPct      = 20
	cancelAllEvery = 300

	// crossEvery: one placement in crossEvery is priced through the mid, to cross the spread;
	// the others rest 1..restMaxOffset cents on their own side of it.
	crossEvery     = 3
	crossMaxOffset = 3
	restMaxOffset  = 5

	// driftEvery: a placement moves its market's mid by one cent, up or down, once in driftEvery.
	driftEvery = 32
	midMin     = 5
	midMax     = 95

	maxQty = 10

	// maxOpenTracked is how many of its recent open orders a bot remembers as cancel candidates.
	maxOpenTracked = 32
)

// stepKind is the kind of a bot step, one request each.
type stepKind uint8

const (
	stepPlace stepKind = iota
	stepCancel
	stepCancelAll
	stepBook
	stepTrades
	stepPositions
	numStepKinds
)

var stepNames = [numStepKinds]string{"place", "cancel", "cancel-all", "order-book", "trades", "positions"}

func (k stepKind) String() string { return stepNames[k] }

const (
	outYes uint8 = 0
	outNo  uint8 = 1
)

func outcomeName(o uint8) string {
	if o == outNo {
		return "NO"
	}
	return "YES"
}

// order is one placement: price is in the terms of its own outcome.
type order struct {
	market  int
	sell    bool
	outcome uint8
	price   int
	qty     int
	cross   bool // priced through the mid, meant to take liquidity
}

// yesPrice is the order's price in the YES book.
func (o order) yesPrice() int {
	if o.outcome == outNo {
		return 100 - o.price
	}
	return o.price
}

// bid tells whether the order sits on the bid side of the YES book (BUY YES or SELL NO).
func (o order) bid() bool { return (o.outcome == outYes) != o.sell }

// step is what a bot does next.
type step struct {
	kind   stepKind
	order  order // stepPlace
	cancel int   // stepCancel: index into the bot's open orders
	market int   // reads of one market
}

// mids holds the shared, slowly drifting mid price (YES cents) of each market.
type mids struct{ v []atomic.Int32 }

func newMids(initial []int) *mids {
	m := &mids{v: make([]atomic.Int32, len(initial))}
	for i, p := range initial {
		m.v[i].Store(int32(clamp(p, midMin, midMax)))
	}
	return m
}

func (m *mids) get(i int) int { return int(m.v[i].Load()) }

// step lets market i's mid take its random-walk step (rarely a move) and returns it.
func (m *mids) step(i int, rng *rand.Rand) int {
	p := &m.v[i]
	if rng.IntN(driftEvery) != 0 {
		return int(p.Load())
	}
	d := int32(1)
	if rng.IntN(2) == 0 {
		d = -1
	}
	for {
		old := p.Load()
		nv := int32(clamp(int(old+d), midMin, midMax))
		if p.CompareAndSwap(old, nv) {
			return int(nv)
		}
	}
}

// generator picks a bot's steps. It is pure apart from its random source and the shared mids.
type generator struct {
	rng     *rand.Rand
	mids    *mids
	markets int
}

func newGenerator(seed, stream uint64, m *mids) *generator {
	return &generator{rng: rand.New(rand.NewPCG(seed, stream)), mids: m, markets: len(m.v)}
}

// next picks the bot's next step given what it knows (its holdings and open orders).
func (g *generator) next(s *botState) step {
	if g.rng.IntN(cancelAllEvery) == 0 {
		return step{kind: stepCancelAll}
	}
	u := g.rng.IntN(100)
	switch {
	case u < placePct:
		return g.place(s)
	case u < placePct+cancelPct:
		if len(s.open) == 0 {
			return g.place(s)
		}
		return step{kind: stepCancel, cancel: g.rng.IntN(len(s.open))}
	}
	m := g.rng.IntN(g.markets)
	switch g.rng.IntN(3) {
	case 0:
		return step{kind: stepBook, market: m}
	case 1:
		return step{kind: stepTrades, market: m}
	}
	return step{kind: stepPositions, market: m}
}

// place builds a placement: a bid or an ask (in YES terms) with equal chance, crossing the mid
// once in crossEvery, as a SELL of shares the bot holds when it has them (more often the more it
// holds), otherwise as a BUY of the other outcome.
func (g *generator) place(s *botState) step {
	m := g.rng.IntN(g.markets)
	mid := g.mids.step(m, g.rng)
	bid := g.rng.IntN(2) == 0
	cross := g.rng.IntN(crossEvery) == 0
	var yes int
	switch {
	case cross && bid:
		yes = mid + 1 + g.rng.IntN(crossMaxOffset)
	case cross:
		yes = mid - 1 - g.rng.IntN(crossMaxOffset)
	case bid:
		yes = mid - 1 - g.rng.IntN(restMaxOffset)
	default:
		yes = mid + 1 + g.rng.IntN(restMaxOffset)
	}
	yes = clamp(yes, 1, 99)
	o := order{market: m, qty: 1 + g.rng.IntN(maxQty), cross: cross}
	// A YES bid is BUY YES or SELL NO; a YES ask is BUY NO or SELL YES.
	sellOutcome, buyOutcome := outNo, outYes
	if !bid {
		sellOutcome, buyOutcome = outYes, outNo
	}
	if avail := s.available(m, sellOutcome); avail > 0 && g.rng.IntN(100) < sellChance(avail) {
		o.sell, o.outcome, o.qty = true, sellOutcome, min(o.qty, avail)
	} else {
		o.outcome = buyOutcome
	}
	o.price = yes
	if o.outcome == outNo {
		o.price = 100 - yes
	}
	return step{kind: stepPlace, order: o, market: m}
}

// sellChance is the percent chance of selling, rather than buying, when the bot holds avail
// sellable shares: inventory is worked off faster the larger it is.
func sellChance(avail int) int {
	switch {
	case avail >= 200:
		return 90
	case avail >= 50:
		return 75
	}
	return 50
}

func clamp(v, lo, hi int) int {
	return max(lo, min(hi, v))
}
