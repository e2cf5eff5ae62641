package engine

import (
	"fmt"
	"testing"
)

// ledger is a minimal account store that applies a Result's effects exactly as a service would, so
// the tests can check that the engine's reported effects conserve cash and shares.
type ledger struct {
	grants   int64
	pairs    int64
	exchange int64               // the fees the exchange took, less the rebates it paid
	cash     map[AccountID]int64 // available
	locked   map[AccountID]int64
	shares   map[holding]int64 // held, locked included
	sLock    map[holding]int64
}

type holding struct {
	account AccountID
	outcome Outcome
}

func newLedger() *ledger {
	return &ledger{
		cash:   map[AccountID]int64{},
		locked: map[AccountID]int64{},
		shares: map[holding]int64{},
		sLock:  map[holding]int64{},
	}
}

func (l *ledger) grant(a AccountID, cents int64) {
	l.grants += cents
	l.cash[a] += cents
}

// reserve locks what the order needs, as a service does before it submits; false when the account
// cannot afford it.
func (l *ledger) reserve(o Order) bool {
	cash, shares := o.Lock()
	return l.lock(o.Account, o.Outcome, cash, shares)
}

// lock moves cash and shares of one holding into its locked part, or back out when negative; false,
// with nothing changed, when the account has too little available.
func (l *ledger) lock(a AccountID, outcome Outcome, cash, shares int64) bool {
	h := holding{a, outcome}
	if l.cash[a] < cash || l.shares[h]-l.sLock[h] < shares {
		return false
	}
	l.cash[a] -= cash
	l.locked[a] += cash
	l.sLock[h] += shares
	return true
}

func (l *ledger) applyLeg(g *Leg) {
	h := holding{g.Account, g.Outcome}
	l.cash[g.Account] += g.Cash
	l.locked[g.Account] += g.CashLocked
	l.shares[h] += g.Shares
	l.sLock[h] += g.SharesLocked
}

func (l *ledger) release(s OrderState) {
	cash, shares := s.Lock()
	l.lock(s.Account, s.Outcome, -cash, -shares)
}

func (l *ledger) apply(r *Result) {
	for i := range r.Fills {
		f := &r.Fills[i]
		l.applyLeg(&f.Taker)
		l.applyLeg(&f.Maker)
		l.exchange += f.Taker.Fee + f.Maker.Fee
		l.pairs += f.Pairs()
	}
	for _, c := range r.Cancelled {
		l.release(c)
	}
	// What the remainder holds as the taker it was, beyond what it locks from now on: the taker's
	// fee reserve beyond the maker's when it rests, all of it when it does not (an IOC, FOK or
	// self-trade remainder; nothing once FILLED).
	held, shares := r.Order.TakerLock()
	if r.Order.Status.Resting() {
		rest, _ := r.Order.Lock()
		held, shares = held-rest, 0
	}
	l.lock(r.Order.Account, r.Order.Outcome, -held, -shares)
}

// check verifies every invariant of docs/architecture.md §3 over the ledger and the book,
// returning the first violation.
func (l *ledger) check(b *Book) error {
	if bid, ask := b.BestBid(), b.BestAsk(); bid >= ask {
		return fmt.Errorf("crossed book: best bid %d >= best ask %d", bid, ask)
	}
	if err := checkDepth(b); err != nil {
		return err
	}

	var money, yes, no int64
	for a, c := range l.cash {
		if c < 0 || l.locked[a] < 0 {
			return fmt.Errorf("account %d: negative cash: available %d, locked %d", a, c, l.locked[a])
		}
		money += c + l.locked[a]
	}
	if l.exchange < 0 {
		return fmt.Errorf("the exchange paid %d cents more rebates than it took fees", -l.exchange)
	}
	if got := money + l.exchange + Payout*l.pairs; got != l.grants {
		return fmt.Errorf("cash not conserved: accounts %d + exchange %d + 100 × %d pairs = %d, grants %d", money, l.exchange, l.pairs, got, l.grants)
	}
	for h, s := range l.shares {
		if s < 0 || l.sLock[h] < 0 || l.sLock[h] > s {
			return fmt.Errorf("%v: bad shares: held %d, locked %d", h, s, l.sLock[h])
		}
		if h.outcome == Yes {
			yes += s
		} else {
			no += s
		}
	}
	if yes != no || yes != l.pairs {
		return fmt.Errorf("shares: YES %d, NO %d, pairs %d", yes, no, l.pairs)
	}

	needCash := map[AccountID]int64{}
	needShares := map[holding]int64{}
	open := map[AccountID]int{}
	for _, o := range b.Resting(nil) {
		if o.Remaining() <= 0 || !o.Status.Resting() {
			return fmt.Errorf("order %d rests with %d remaining, status %v", o.ID, o.Remaining(), o.Status)
		}
		open[o.Account]++
		cash, shares := o.Lock()
		needCash[o.Account] += cash
		needShares[holding{o.Account, o.Outcome}] += shares
	}
	for a := range l.cash {
		if got := b.OpenOrders(a); got != open[a] {
			return fmt.Errorf("account %d: OpenOrders says %d, %d rest", a, got, open[a])
		}
	}
	for a, c := range l.locked {
		if c != needCash[a] {
			return fmt.Errorf("account %d: locked cash %d, open orders need %d", a, c, needCash[a])
		}
	}
	for h, s := range l.sLock {
		if s != needShares[h] {
			return fmt.Errorf("%v: locked shares %d, open orders need %d", h, s, needShares[h])
		}
	}
	return nil
}

// checkDepth compares a full depth snapshot with levels summed independently from the resting
// orders, and checks that the NO view mirrors the YES view exactly.
func checkDepth(b *Book) error {
	var bids, asks [Payout]int64
	for _, o := range b.Resting(nil) {
		if o.IsBid() {
			bids[o.BookPrice()] += o.Remaining()
		} else {
			asks[o.BookPrice()] += o.Remaining()
		}
	}
	var want Depth
	var total int64
	for p := MaxPrice; p >= MinPrice; p-- {
		if bids[p] > 0 {
			total += bids[p]
			want.Yes.Bids = append(want.Yes.Bids, Level{p, bids[p], total})
		}
	}
	total = 0
	for p := MinPrice; p <= MaxPrice; p++ {
		if asks[p] > 0 {
			total += asks[p]
			want.Yes.Asks = append(want.Yes.Asks, Level{p, asks[p], total})
		}
	}
	var d Depth
	b.Depth(MaxPrice, &d)
	if fmt.Sprint(d.Yes.Bids) != fmt.Sprint(want.Yes.Bids) || fmt.Sprint(d.Yes.Asks) != fmt.Sprint(want.Yes.Asks) {
		return fmt.Errorf("depth %v / %v, resting orders say %v / %v", d.Yes.Bids, d.Yes.Asks, want.Yes.Bids, want.Yes.Asks)
	}
	return checkMirror(&d)
}

func checkMirror(d *Depth) error {
	pairs := []struct{ no, yes []Level }{{d.No.Bids, d.Yes.Asks}, {d.No.Asks, d.Yes.Bids}}
	for _, p := range pairs {
		if len(p.no) != len(p.yes) {
			return fmt.Errorf("mirror: %d NO levels against %d YES levels", len(p.no), len(p.yes))
		}
		for i := range p.no {
			n, y := p.no[i], p.yes[i]
			if n.Price != Payout-y.Price || n.Quantity != y.Quantity || n.Total != y.Total {
				return fmt.Errorf("mirror: NO level %v against YES level %v", n, y)
			}
		}
	}
	if (d.Yes.LastTradePrice == 0) != (d.No.LastTradePrice == 0) ||
		(d.Yes.LastTradePrice != 0 && d.No.LastTradePrice != Payout-d.Yes.LastTradePrice) {
		return fmt.Errorf("mirror: last trade YES %d, NO %d", d.Yes.LastTradePrice, d.No.LastTradePrice)
	}
	return nil
}

// trade reserves, submits and applies one order, as a service would, then checks every invariant.
func (l *ledger) trade(t testing.TB, b *Book, o Order) *Result {
	t.Helper()
	if !l.reserve(o) {
		t.Fatalf("cannot reserve %+v", o)
	}
	r := new(Result)
	if err := b.Submit(o, r); err != nil {
		t.Fatalf("submit %+v: %v", o, err)
	}
	l.apply(r)
	l.mustCheck(t, b)
	return r
}

// mustCheck fails the test on any invariant violation.
func (l *ledger) mustCheck(t testing.TB, b *Book) {
	t.Helper()
	if err := l.check(b); err != nil {
		t.Fatal(err)
	}
}

// amend amends a resting order as a service would: it reserves the order's AmendLock when that is
// positive, amends, releases it when negative, and applies the result. It returns Amend's error,
// with the reservation undone, or ok false when the account cannot afford the amend.
func (l *ledger) amend(b *Book, id OrderID, price int, remaining int64, r *Result) (ok bool, err error) {
	st, found := b.Order(id)
	if !found {
		return true, b.Amend(id, price, remaining, r)
	}
	cash, shares := st.AmendLock(price, remaining)
	grows := cash > 0 || shares > 0
	if grows && !l.lock(st.Account, st.Outcome, cash, shares) {
		return false, nil
	}
	if err := b.Amend(id, price, remaining, r); err != nil {
		if grows {
			l.lock(st.Account, st.Outcome, -cash, -shares)
		}
		return true, err
	}
	if !grows {
		l.lock(st.Account, st.Outcome, cash, shares)
	}
	l.apply(r)
	return true, nil
}
