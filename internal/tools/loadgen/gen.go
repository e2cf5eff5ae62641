package loadgen

import (
	"math/rand/v2"
	"sync/atomic"
)

// The basic mix of a bot's steps. Per step: with probability 1/cancelAllEvery a cancel-everything;
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

// The market-maker mix. Per step: with probability 1/mmCancelMarketEvery a cancel of all the bot's
// orders in one market (POST /orders/cancel with a marketId); otherwise mmAmendPct % amends of one
// of its open orders, mmBatchPct % batches of mmMinBatch..mmMaxBatch placements in one market,
// mmCancelPct % cancels of its mmMinCancel..mmMaxCancel oldest open orders in one request,
// mmPlacePct % single placements, and the rest reads as in the basic mix. An amend or a cancel
// without an open order to act on is a batch instead.
//
// The bot never has more than mmMaxOpen orders open: a placement that would take it past that is a
// cancel instead. So it remembers every order it has open (mmMaxOpen <= maxOpenTracked), which
// keeps its amends and cancels on orders that exist, and it stays far below the exchange's limit
// of open orders per account and market (1,000 by default; 20 in the contract suite's exchange).
const (
	mmAmendPct          = 35
	mmBatchPct          = 25
	mmCancelPct         = 15
	mmPlacePct          = 15
	mmCancelMarketEvery = 300

	mmMinBatch  = 2
	mmMaxBatch  = 5
	mmMinCancel = 2
	mmMaxCancel = 5
	mmMaxOpen   = 16

	// mmShrinkEvery: one amend in mmShrinkEvery lowers the order's remaining quantity at the same
	// price, which keeps its place in the queue; the others move it to a fresh price near the mid.
	mmShrinkEvery = 3
)

// The bot's view of its open orders must hold all of them in the market-maker mix.
const _ = uint(maxOpenTracked - mmMaxOpen)

// Mix is a named choice of the bots' steps: which requests they send and how often.
type Mix string

const (
	// MixBasic is single placements (POST /order), cancels of one order and of everything, and
	// reads: the mix of every figure measured before batches and amends existed, and the default.
	MixBasic Mix = "basic"
	// MixMarketMaker is bots that keep quotes: they place in batches (POST /orders/batch), move
	// and shrink resting orders in place (POST /order/amend) and cancel several orders, or a
	// market's, in one request (POST /orders/cancel), besides single placements and reads.
	MixMarketMaker Mix = "market-maker"
)

// Mixes lists the mixes, the default first.
var Mixes = []Mix{MixBasic, MixMarketMaker}

// mixSpec is what the runner and the report need to know of a mix.
type mixSpec struct {
	// kinds are the request kinds the mix sends, in the report's order.
	kinds []stepKind
	// placementsPer100 is the mean number of placements per hundred steps, as the proportions
	// give it (ignoring the fallbacks, which depend on the bot's state): open loop turns its rate
	// of placements into a rate of steps with it.
	placementsPer100 float64
}

var mixSpecs = map[Mix]mixSpec{
	MixBasic: {
		kinds:            []stepKind{stepPlace, stepCancel, stepCancelAll, stepBook, stepTrades, stepPositions},
		placementsPer100: placePct,
	},
	MixMarketMaker: {
		kinds: []stepKind{stepPlace, stepPlaceBatch, stepAmend, stepCancelBatch, stepCancelMarket,
			stepBook, stepTrades, stepPositions},
		placementsPer100: mmPlacePct + mmBatchPct*(mmMinBatch+mmMaxBatch)/2.0,
	},
}

// stepKind is the kind of a bot step, one request each.
type stepKind uint8

const (
	stepPlace stepKind = iota
	stepCancel
	stepCancelAll
	stepBook
	stepTrades
	stepPositions
	stepPlaceBatch   // POST /orders/batch
	stepAmend        // POST /order/amend
	stepCancelBatch  // POST /orders/cancel with orderIds
	stepCancelMarket // POST /orders/cancel with a marketId
	numStepKinds
)

var stepNames = [numStepKinds]string{"place", "cancel", "cancel-all", "order-book", "trades", "positions",
	"place-batch", "amend", "cancel-batch", "cancel-market"}

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

// step is what a bot does next. It is a comparable value (no slices), so that tests can compare
// two runs' steps with ==.
type step struct {
	kind   stepKind
	order  order // stepPlace
	cancel int   // stepCancel: index into the bot's open orders; stepCancelBatch: how many of its oldest
	market int   // reads of one market; stepPlaceBatch and stepCancelMarket: the market
	// stepPlaceBatch: the placements batch[:n], all in one market.
	batch [mmMaxBatch]order
	n     int
	amend amendStep // stepAmend
}

// amendStep is an amend of one of the bot's open orders: a new price (in the order's own terms),
// a new remaining quantity, or both; zero leaves that one as it is.
type amendStep struct {
	open  int // index into the bot's open orders
	price int
	qty   int
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
	mix     Mix
}

func newGenerator(seed, stream uint64, m *mids, mix Mix) *generator {
	return &generator{rng: rand.New(rand.NewPCG(seed, stream)), mids: m, markets: len(m.v), mix: mix}
}

// next picks the bot's next step given what it knows (its holdings and open orders).
func (g *generator) next(s *botState) step {
	if g.mix == MixMarketMaker {
		return g.nextMarketMaker(s)
	}
	return g.nextBasic(s)
}

// nextBasic picks a step of the basic mix. Its random draws are those of the load generator
// before there were other mixes, so that a seed still gives the runs measured then.
func (g *generator) nextBasic(s *botState) step {
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
	return g.read()
}

// read picks a read of one market's order book or trades, or of the bot's positions, with equal
// chance.
func (g *generator) read() step {
	m := g.rng.IntN(g.markets)
	switch g.rng.IntN(3) {
	case 0:
		return step{kind: stepBook, market: m}
	case 1:
		return step{kind: stepTrades, market: m}
	}
	return step{kind: stepPositions, market: m}
}

// nextMarketMaker picks a step of the market-maker mix.
func (g *generator) nextMarketMaker(s *botState) step {
	if g.rng.IntN(mmCancelMarketEvery) == 0 {
		return step{kind: stepCancelMarket, market: g.rng.IntN(g.markets)}
	}
	u := g.rng.IntN(100)
	switch {
	case u < mmAmendPct:
		if len(s.open) == 0 {
			return g.batch(s)
		}
		return g.amend(s)
	case u < mmAmendPct+mmBatchPct:
		return g.batch(s)
	case u < mmAmendPct+mmBatchPct+mmCancelPct:
		if len(s.open) == 0 {
			return g.batch(s)
		}
		return g.cancelOldest(s)
	case u < mmAmendPct+mmBatchPct+mmCancelPct+mmPlacePct:
		if len(s.open) >= mmMaxOpen {
			return g.cancelOldest(s)
		}
		return g.place(s)
	}
	return g.read()
}

// batch builds a batch of mmMinBatch..mmMaxBatch placements in one market, each priced as a single
// placement is, around the same mid, or, when they could take the bot past mmMaxOpen open orders,
// a cancel of its oldest instead. The batch's SELLs together never exceed the shares the bot holds.
func (g *generator) batch(s *botState) step {
	n := mmMinBatch + g.rng.IntN(mmMaxBatch-mmMinBatch+1)
	if len(s.open)+n > mmMaxOpen {
		return g.cancelOldest(s)
	}
	st := step{kind: stepPlaceBatch, market: g.rng.IntN(g.markets), n: n}
	mid := g.mids.step(st.market, g.rng) // one moment: the batch's orders see the same mid
	var selling [2]int                   // shares of each outcome the batch's earlier orders sell
	for i := range n {
		o := g.placeIn(s, st.market, mid, &selling)
		if o.sell {
			selling[o.outcome] += o.qty
		}
		st.batch[i] = o
	}
	return st
}

// cancelOldest cancels mmMinCancel..mmMaxCancel of the bot's oldest open orders (as many as it has,
// when fewer) in one request: the quotes it has left longest are the stalest.
func (g *generator) cancelOldest(s *botState) step {
	n := mmMinCancel + g.rng.IntN(mmMaxCancel-mmMinCancel+1)
	return step{kind: stepCancelBatch, cancel: min(n, len(s.open))}
}

// amend picks one of the bot's open orders and either lowers its remaining quantity at the same
// price (once in mmShrinkEvery, when it has more than one left), which keeps its place in the
// queue, or moves it to a fresh resting price on its own side of its market's mid, as a market
// maker follows the market; a BUY then also gets a new quantity half the time. A SELL keeps its
// quantity when it moves, so that an amend never asks for shares the bot may not have.
func (g *generator) amend(s *botState) step {
	i := g.rng.IntN(len(s.open))
	oo := &s.open[i]
	st := step{kind: stepAmend, market: oo.market, amend: amendStep{open: i}}
	if oo.remaining > 1 && g.rng.IntN(mmShrinkEvery) == 0 {
		st.amend.qty = 1 + g.rng.IntN(oo.remaining-1)
		return st
	}
	mid := g.mids.step(oo.market, g.rng)
	var yes int
	if oo.bid() {
		yes = mid - 1 - g.rng.IntN(restMaxOffset)
	} else {
		yes = mid + 1 + g.rng.IntN(restMaxOffset)
	}
	yes = clamp(yes, 1, 99)
	st.amend.price = yes
	if oo.outcome == outNo {
		st.amend.price = 100 - yes
	}
	if !oo.sell && g.rng.IntN(2) == 0 {
		st.amend.qty = 1 + g.rng.IntN(maxQty)
	}
	return st
}

// place builds a placement in a market picked at random, whose mid takes its random-walk step
// first (see placeIn).
func (g *generator) place(s *botState) step {
	m := g.rng.IntN(g.markets)
	mid := g.mids.step(m, g.rng)
	return step{kind: stepPlace, order: g.placeIn(s, m, mid, nil), market: m}
}

// placeIn builds a placement in market m, whose mid is mid: a bid or an ask (in YES terms) with
// equal chance, crossing the mid once in crossEvery, as a SELL of shares the bot holds when it has
// them (more often the more it holds), otherwise as a BUY of the other outcome. selling, when not
// nil, holds the shares of each outcome of m that other orders of the same request already sell:
// they are not the bot's to sell again.
func (g *generator) placeIn(s *botState, m, mid int, selling *[2]int) order {
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
	avail := s.available(m, sellOutcome)
	if selling != nil {
		avail -= selling[sellOutcome]
	}
	if avail > 0 && g.rng.IntN(100) < sellChance(avail) {
		o.sell, o.outcome, o.qty = true, sellOutcome, min(o.qty, avail)
	} else {
		o.outcome = buyOutcome
	}
	o.price = yes
	if o.outcome == outNo {
		o.price = 100 - yes
	}
	return o
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
