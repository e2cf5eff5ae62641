package main

import "fmt"

// The arithmetic of an event's arbitrage, apart from the exchange so that it can be table-tested.
// README.md derives it. Prices are YES prices in cents; a share that wins pays 100.

// Level is an outcome's best YES bid or ask: its price and the quantity resting there (0: none).
type Level struct{ Price, Quantity int }

// Book is one outcome's best YES bid and ask.
type Book struct {
	Key      string
	Bid, Ask Level
}

// Direction is which way an event is mispriced.
type Direction int

const (
	// BuySets: the YES asks sum under what a full set of YES pays, so buy one YES of every
	// outcome; the set pays at resolution.
	BuySets Direction = iota + 1
	// SellSets: the YES bids sum over 100, so sell a full set of YES — buy one NO of every
	// outcome at 100 − bid and convert the n NO shares into (n − 1) × 100 cents at once.
	SellSets
)

func (d Direction) String() string {
	switch d {
	case BuySets:
		return "buy YES of every outcome"
	case SellSets:
		return "buy NO of every outcome and convert"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Plan is a trade the books allow: Sets full sets in Direction, each earning Profit cents.
type Plan struct {
	Direction Direction
	Sets      int
	Profit    int   // cents per set, locked once every leg has filled
	Prices    []int // each leg's order price, in the outcomes' order: YES for BuySets, NO for SellSets
}

// SetPayout is the least a full set of YES shares of an event of n outcomes pays: 100 when it
// resolves (exactly one outcome wins), n × ⌊100/n⌋ when it is cancelled (each YES pays ⌊100/n⌋).
// A set bought under it is a profit whatever happens.
func SetPayout(n int) int { return n * (100 / n) }

// PlanFor is the trade the books allow, if any: at most size sets, at the best levels only, each
// earning at least edge cents (edge ≥ 1: pmx charges no fees, so any positive difference is a
// profit). It needs every outcome's book: an outcome without a bid (or an ask) has nothing to
// trade against in that direction.
func PlanFor(books []Book, edge, size int) (Plan, bool) {
	n := len(books)
	if n < 2 || size < 1 {
		return Plan{}, false
	}
	edge = max(edge, 1)
	sumBid, sumAsk, bidDepth, askDepth := 0, 0, size, size
	for _, b := range books {
		sumBid += b.Bid.Price
		sumAsk += b.Ask.Price
		bidDepth, askDepth = min(bidDepth, b.Bid.Quantity), min(askDepth, b.Ask.Quantity)
	}
	if profit := sumBid - 100; profit >= edge && bidDepth > 0 {
		p := Plan{Direction: SellSets, Sets: bidDepth, Profit: profit}
		for _, b := range books {
			p.Prices = append(p.Prices, 100-b.Bid.Price) // NO bought at 100 − the YES bid meets that bid
		}
		return p, true
	}
	if profit := SetPayout(n) - sumAsk; profit >= edge && askDepth > 0 {
		p := Plan{Direction: BuySets, Sets: askDepth, Profit: profit}
		for _, b := range books {
			p.Prices = append(p.Prices, b.Ask.Price)
		}
		return p, true
	}
	return Plan{}, false
}
