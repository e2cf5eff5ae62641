package engine

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"testing"
)

// sim drives a book and a ledger through random operations — submissions of all four order kinds
// from many accounts, with every time in force, self-trade mode and post-only, amends, cancels,
// account-wide cancels and rebuilds — and checks every invariant after each step. The property
// tests feed it a seeded PRNG, the fuzz target feeds it fuzzer bytes.
type sim struct {
	book     *Book
	ledger   *ledger
	accounts int
	nextID   OrderID
	ids      []OrderID // every id submitted; cancels pick from these, resting or not
	res      Result
	log      hash.Hash64 // digest of every outcome, for the determinism test
	stats    simStats
	fees     Fees // the schedule new orders carry; changed now and then
}

type simStats struct {
	submits, fills, stp, cancels, refused                             int
	ioc, fokFilled, fokKilled, postOnly, postOnlyRefused, stpIncoming int
	amends, amendsInPlace, amendsTrading, amendsRefused               int
	feesPaid, rebatesPaid                                             int // legs that paid a fee, or were paid a rebate
}

const simGrant = 100_000

func newSim(accounts int) *sim {
	s := &sim{book: New(16), ledger: newLedger(), accounts: accounts, nextID: 1, log: fnv.New64a()}
	for a := 1; a <= accounts; a++ {
		s.ledger.grant(AccountID(a), simGrant)
	}
	return s
}

// step performs one operation chosen by pick, which returns a number in [0, n).
func (s *sim) step(t testing.TB, pick func(n int) int) {
	t.Helper()
	switch op := pick(100); {
	case op < 65:
		s.submit(t, pick)
	case op < 77:
		s.amend(t, pick)
	case op < 93:
		if len(s.ids) == 0 {
			return
		}
		id := s.ids[pick(len(s.ids))]
		st, err := s.book.Cancel(id)
		if errors.Is(err, ErrUnknownOrder) {
			if _, ok := s.book.Order(id); ok {
				t.Fatalf("cancel %d: unknown, yet the book holds it", id)
			}
			return
		}
		if err != nil {
			t.Fatalf("cancel %d: %v", id, err)
		}
		if st.Status != StatusCancelled && st.Status != StatusPartiallyFilledCancelled {
			t.Fatalf("cancel %d: status %v", id, st.Status)
		}
		s.stats.cancels++
		s.ledger.release(st)
		fmt.Fprintln(s.log, "cancel", st)
	case op < 97:
		a := AccountID(1 + pick(s.accounts))
		for _, st := range s.book.CancelAccount(a, nil) {
			if st.Account != a {
				t.Fatalf("cancel-all for %d cancelled %+v", a, st)
			}
			s.stats.cancels++
			s.ledger.release(st)
			fmt.Fprintln(s.log, "cancel-all", st)
		}
		for _, st := range s.book.Resting(nil) {
			if st.Account == a {
				t.Fatalf("cancel-all for %d left %+v", a, st)
			}
		}
	default:
		s.rebuild(t)
	}
	s.ledger.mustCheck(t, s.book)
	if err := checkQueuePositions(s.book); err != nil {
		t.Fatal(err)
	}
}

// checkQueuePositions checks every resting order's QueuePosition against the book's resting
// orders, oldest first within a level: its shares ahead are the remaining of the orders placed
// earlier at its level (YES and NO orders that share it included), the level's total is the sum of
// all of them.
func checkQueuePositions(b *Book) error {
	type lk struct{ side, key int }
	resting := b.Resting(nil)
	levels := map[lk]int64{}
	aheads := make([]int64, len(resting))
	for i, st := range resting {
		k := lk{sideOf(st.Side, st.Outcome), keyOf(st.Side, st.Price)}
		aheads[i] = levels[k]
		levels[k] += st.Remaining()
	}
	for i, st := range resting {
		want := QueuePosition{Ahead: aheads[i], Level: levels[lk{sideOf(st.Side, st.Outcome), keyOf(st.Side, st.Price)}]}
		if got, ok := b.QueuePosition(st.ID); !ok || got != want {
			return fmt.Errorf("queue position of %+v: %+v (resting %v), want %+v", st, got, ok, want)
		}
	}
	if _, ok := b.QueuePosition(^OrderID(0)); ok {
		return errors.New("queue position of an order the book does not hold")
	}
	return nil
}

func (s *sim) submit(t testing.TB, pick func(n int) int) {
	t.Helper()
	o := Order{
		ID:       s.nextID,
		Account:  AccountID(1 + pick(s.accounts)),
		Side:     Side(1 + pick(2)),
		Outcome:  Outcome(1 + pick(2)),
		Quantity: int64(1 + pick(25)),
	}
	if pick(40) == 0 { // a new schedule, for the orders placed from now on
		rates := []int{0, 1, 700, 2500, MaxFeeRate}
		taker := rates[pick(len(rates))]
		s.fees = Fees{Taker: taker, Maker: taker * (pick(5) - 2) / 2}
	}
	o.Fees = s.fees
	o.Price = s.price(pick)
	// Mostly GTC, as on a real venue; then IOC and FOK takers, GTD, and post-only makers.
	switch tif := pick(20); {
	case tif < 3:
		o.TimeInForce = IOC
	case tif < 6:
		o.TimeInForce = FOK
	case tif < 8:
		o.TimeInForce = GTD
	}
	if pick(3) == 0 {
		o.SelfTrade = CancelIncoming
	}
	if o.TimeInForce.Rests() && pick(5) == 0 {
		o.PostOnly = true
	}
	if !s.ledger.reserve(o) {
		s.stats.refused++
		return
	}
	before := s.book.Resting(nil)
	err := s.book.Submit(o, &s.res)
	if errors.Is(err, ErrPostOnlyWouldCross) {
		cash, shares := o.Lock() // what it reserved: its lock as a taker
		s.ledger.lock(o.Account, o.Outcome, -cash, -shares)
		if !o.PostOnly || !crosses(s.book, &o) {
			t.Fatalf("submit %+v refused as crossing; best bid %d, ask %d", o, s.book.BestBid(), s.book.BestAsk())
		}
		if after := s.book.Resting(nil); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refused post-only order %+v changed the book", o)
		}
		s.stats.postOnlyRefused++
		fmt.Fprintln(s.log, "refused", o)
		return
	}
	if err != nil {
		t.Fatalf("submit %+v: %v", o, err)
	}
	s.nextID++
	s.ids = append(s.ids, o.ID)
	s.stats.submits++
	s.stats.fills += len(s.res.Fills)
	s.stats.stp += len(s.res.Cancelled)
	for i := range s.res.Fills {
		for _, fee := range []int64{s.res.Fills[i].Taker.Fee, s.res.Fills[i].Maker.Fee} {
			switch {
			case fee > 0:
				s.stats.feesPaid++
			case fee < 0:
				s.stats.rebatesPaid++
			}
		}
	}
	if err := checkResult(&o, 0, before, &s.res); err != nil {
		t.Fatal(err)
	}
	if err := checkPlaced(s.book, &s.res); err != nil {
		t.Fatal(err)
	}
	switch {
	case o.PostOnly:
		s.stats.postOnly++
	case s.res.Reason == ReasonSelfTrade:
		s.stats.stpIncoming++
	case o.TimeInForce == IOC:
		s.stats.ioc++
	case o.TimeInForce == FOK && s.res.Reason == ReasonFOK:
		s.stats.fokKilled++
		if after := s.book.Resting(nil); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("killed FOK order %+v changed the book", o)
		}
	case o.TimeInForce == FOK:
		s.stats.fokFilled++
	}
	s.ledger.apply(&s.res)
	fmt.Fprintln(s.log, "submit", s.res.Order, s.res.Reason, s.res.Fills, s.res.Cancelled)
}

// price picks a limit: clustered around a mid of 50 so that many orders cross, the edges used too.
func (s *sim) price(pick func(n int) int) int {
	if pick(10) == 0 {
		return MinPrice + pick(MaxPrice)
	}
	return 40 + pick(21)
}

// amend amends an order, as a service would (see ledger.amend): mostly a resting one, sometimes
// one picked from every id submitted, which has often left the book.
func (s *sim) amend(t testing.TB, pick func(n int) int) {
	t.Helper()
	if len(s.ids) == 0 {
		return
	}
	id := s.ids[pick(len(s.ids))]
	if resting := s.book.Resting(nil); len(resting) > 0 && pick(4) != 0 {
		id = resting[pick(len(resting))].ID
	}
	old, rests := s.book.Order(id)
	price, remaining := old.Price, int64(1+pick(25))
	switch p := pick(4); {
	case !rests:
		price = s.price(pick)
	case p == 0: // a small step, which often crosses near the mid
		price = min(max(price+pick(7)-3, MinPrice), MaxPrice)
	case p == 1:
		price = s.price(pick)
	}
	before := s.book.Resting(nil)
	ok, err := s.ledger.amend(s.book, id, price, remaining, &s.res)
	switch {
	case !ok:
		s.stats.refused++
		return
	case errors.Is(err, ErrUnknownOrder) && !rests:
		return
	case errors.Is(err, ErrPostOnlyWouldCross):
		amended := old.Order
		amended.Price = price
		if !old.PostOnly || !crosses(s.book, &amended) {
			t.Fatalf("amend of %+v to %d refused as crossing; best bid %d, ask %d", old, price, s.book.BestBid(), s.book.BestAsk())
		}
		if after := s.book.Resting(nil); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refused amend of %+v changed the book", old)
		}
		s.stats.amendsRefused++
		return
	case err != nil:
		t.Fatalf("amend %d (resting %v) to %d × %d: %v", id, rests, price, remaining, err)
	}
	s.stats.amends++
	s.stats.fills += len(s.res.Fills)
	s.stats.stp += len(s.res.Cancelled)
	for i := range s.res.Fills {
		for _, fee := range []int64{s.res.Fills[i].Taker.Fee, s.res.Fills[i].Maker.Fee} {
			switch {
			case fee > 0:
				s.stats.feesPaid++
			case fee < 0:
				s.stats.rebatesPaid++
			}
		}
	}
	amended := old.Order
	amended.Price, amended.Quantity = price, old.Filled+remaining
	if s.res.Order.Order != amended {
		t.Fatalf("amend of %+v to %d × %d: order now %+v", old, price, remaining, s.res.Order.Order)
	}
	if err := checkResult(&amended, old.Filled, before, &s.res); err != nil {
		t.Fatal(err)
	}
	if err := checkPlaced(s.book, &s.res); err != nil {
		t.Fatal(err)
	}
	if len(s.res.Fills) > 0 || s.res.Reason != ReasonNone {
		s.stats.amendsTrading++
	}
	if err := checkPriority(before, s.book.Resting(nil), &old, &s.res); err != nil {
		t.Fatal(err)
	}
	if price == old.Price && remaining <= old.Remaining() {
		s.stats.amendsInPlace++
	}
	fmt.Fprintln(s.log, "amend", s.res.Order, s.res.Reason, s.res.Fills, s.res.Cancelled)
}

// crosses reports whether the order would meet the best resting order on the other side.
func crosses(b *Book, o *Order) bool {
	if o.IsBid() {
		return o.BookPrice() >= b.BestAsk()
	}
	return o.BookPrice() <= b.BestBid()
}

// fillableNow is how much of o the resting orders, bids best first then asks best first, could fill
// now under o's self-trade mode: own orders pass (CANCEL_RESTING) or end the count
// (CANCEL_INCOMING). It is worked out apart from the engine's own count.
func fillableNow(resting []OrderState, o *Order) int64 {
	var q int64
	for _, m := range resting {
		if m.IsBid() == o.IsBid() {
			continue
		}
		if o.IsBid() && m.BookPrice() > o.BookPrice() || !o.IsBid() && m.BookPrice() < o.BookPrice() {
			break // best first: no later order crosses either
		}
		if m.Account == o.Account {
			if o.SelfTrade == CancelIncoming {
				break
			}
			continue
		}
		q += m.Remaining()
	}
	return q
}

// checkResult checks a submission's or amend's report against the order, which had filled filled
// before, and the book as it was: fills at or better than its limit, never with itself, quantities
// adding up, the final status and reason matching, and the rules of its time in force, self-trade
// mode and post-only flag.
func checkResult(o *Order, filled int64, before []OrderState, r *Result) error {
	start := filled
	for i, f := range r.Fills {
		filled += f.Quantity
		if f.Taker.Order != o.ID || f.Taker.Filled != filled {
			return fmt.Errorf("order %d fill %d: taker leg %+v, want filled %d", o.ID, i, f.Taker, filled)
		}
		if f.Maker.Account == o.Account {
			return fmt.Errorf("order %d traded with its own account: %+v", o.ID, f)
		}
		if (o.Side == Buy && f.Taker.Price > o.Price) || (o.Side == Sell && f.Taker.Price < o.Price) {
			return fmt.Errorf("order %d (%v @%d) executed at %d", o.ID, o.Side, o.Price, f.Taker.Price)
		}
		if f.Taker.Price != yesPrice(o.Outcome, f.YesPrice) || f.Maker.Price != yesPrice(f.Maker.Outcome, f.YesPrice) {
			return fmt.Errorf("order %d: leg prices %d/%d at YES %d", o.ID, f.Taker.Price, f.Maker.Price, f.YesPrice)
		}
	}
	for _, c := range r.Cancelled {
		if c.Account != o.Account || o.SelfTrade != CancelResting {
			return fmt.Errorf("order %d (%v): STP cancelled %+v", o.ID, o.SelfTrade, c)
		}
	}
	if r.Order.Filled != filled || r.Order.Status != status(o.Quantity, filled, r.Reason != ReasonNone) {
		return fmt.Errorf("order %d: state %+v, reason %v, after fills of %d", o.ID, r.Order, r.Reason, filled)
	}
	want := o.Quantity - start // what the order asked to fill
	can := fillableNow(before, o)
	switch {
	case o.PostOnly && (len(r.Fills) > 0 || len(r.Cancelled) > 0 || r.Reason != ReasonNone):
		return fmt.Errorf("post-only order %d took: %+v", o.ID, r)
	case r.Reason == ReasonSelfTrade && o.SelfTrade != CancelIncoming,
		r.Reason == ReasonIOC && o.TimeInForce != IOC,
		r.Reason == ReasonFOK && o.TimeInForce != FOK,
		r.Reason == ReasonNone && !o.TimeInForce.Rests() && filled != o.Quantity:
		return fmt.Errorf("order %d (%v, %v) ended %v with reason %v", o.ID, o.TimeInForce, o.SelfTrade, r.Order.Status, r.Reason)
	case o.TimeInForce == FOK && (r.Reason == ReasonFOK) != (can < want):
		return fmt.Errorf("FOK order %d for %d: reason %v, yet the book could fill %d", o.ID, want, r.Reason, can)
	case r.Reason == ReasonFOK && (len(r.Fills) > 0 || len(r.Cancelled) > 0 || filled != start):
		return fmt.Errorf("killed FOK order %d had effects: %+v", o.ID, r)
	case r.Reason != ReasonSelfTrade && r.Reason != ReasonFOK && filled-start != min(want, can):
		return fmt.Errorf("order %d for %d filled %d, yet the book could fill %d", o.ID, want, filled-start, can)
	}
	return nil
}

// checkPlaced checks that the order rests in the book exactly when its result says so, and as it
// says; and that an order cancelled under CANCEL_INCOMING stopped at its own account's order, at
// the head of the best level it crosses.
func checkPlaced(b *Book, r *Result) error {
	st, ok := b.Order(r.Order.ID)
	if ok != r.Order.Status.Resting() || ok && st != r.Order {
		return fmt.Errorf("order %+v, yet the book holds %+v (%v)", r.Order, st, ok)
	}
	if r.Reason != ReasonSelfTrade {
		return nil
	}
	for _, m := range b.Resting(nil) {
		if m.IsBid() != r.Order.IsBid() && crosses(b, &r.Order.Order) &&
			(m.IsBid() && m.BookPrice() == b.BestBid() || !m.IsBid() && m.BookPrice() == b.BestAsk()) {
			if m.Account != r.Order.Account {
				return fmt.Errorf("order %+v stopped for self-trade at %+v", r.Order, m)
			}
			return nil
		}
	}
	return fmt.Errorf("order %+v stopped for self-trade with nothing of its own to meet", r.Order)
}

// checkPriority checks where an amend left the order in its queue: in its place when it kept its
// price and asked for no more, else behind every order at its new price. Other orders keep their
// order either way.
func checkPriority(before, after []OrderState, old *OrderState, r *Result) error {
	if !r.Order.Status.Resting() {
		return nil
	}
	ids := func(list []OrderState) (out []OrderID) {
		for _, o := range list {
			out = append(out, o.ID)
		}
		return out
	}
	if r.Order.Price == old.Price && r.Order.Remaining() <= old.Remaining() {
		if fmt.Sprint(ids(before)) != fmt.Sprint(ids(after)) {
			return fmt.Errorf("amend of %d in place moved it: %v, was %v", old.ID, ids(after), ids(before))
		}
		return nil
	}
	if len(r.Fills) > 0 || len(r.Cancelled) > 0 {
		return nil // orders left the book as it traded
	}
	for i, o := range after {
		if o.ID == r.Order.ID {
			if i+1 < len(after) && after[i+1].IsBid() == o.IsBid() && after[i+1].BookPrice() == o.BookPrice() {
				return fmt.Errorf("amended order %d rests ahead of %d", o.ID, after[i+1].ID)
			}
			rest := append(after[:i:i], after[i+1:]...)
			var was []OrderState
			for _, p := range before {
				if p.ID != o.ID {
					was = append(was, p)
				}
			}
			if fmt.Sprint(ids(rest)) != fmt.Sprint(ids(was)) {
				return fmt.Errorf("amend of %d reordered the others: %v, was %v", o.ID, ids(rest), ids(was))
			}
			return nil
		}
	}
	return fmt.Errorf("amended order %d is not resting", r.Order.ID)
}

// rebuild replaces the book with one rebuilt from its resting orders and checks they are equal,
// in content and in how they go on to match.
func (s *sim) rebuild(t testing.TB) {
	t.Helper()
	before := s.book.Resting(nil)
	nb, err := Rebuild(before, s.book.LastTradePrice())
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if got := nb.Resting(nil); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("rebuilt book differs:\n got %v\nwant %v", got, before)
	}
	if nb.LastTradePrice() != s.book.LastTradePrice() {
		t.Fatalf("rebuilt last price %d, want %d", nb.LastTradePrice(), s.book.LastTradePrice())
	}
	s.book = nb
}

func TestPropertyRandomSequences(t *testing.T) {
	steps := 8_000
	if testing.Short() {
		steps = 2_000
	}
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
			s := newSim(2 + int(seed)*3)
			for range steps {
				s.step(t, rng.IntN)
			}
			// A run that never traded, minted, burned, self-traded or used every order type would
			// prove little.
			st := s.stats
			for _, n := range []int{st.fills, st.stp, st.cancels, st.ioc, st.fokFilled, st.fokKilled, st.postOnly,
				st.postOnlyRefused, st.stpIncoming, st.amends, st.amendsInPlace, st.amendsTrading, st.amendsRefused,
				st.feesPaid, st.rebatesPaid} {
				if n == 0 || s.ledger.pairs == 0 {
					t.Fatalf("sequence too tame: %+v, pairs %d", s.stats, s.ledger.pairs)
				}
			}
			t.Logf("%+v, pairs outstanding %d, resting %d", s.stats, s.ledger.pairs, s.book.Len())
		})
	}
}

func TestDeterministic(t *testing.T) {
	digest := func() uint64 {
		rng := rand.New(rand.NewPCG(42, 7))
		s := newSim(10)
		for range 5_000 {
			s.step(t, rng.IntN)
		}
		return s.log.Sum64()
	}
	if a, b := digest(), digest(); a != b {
		t.Fatalf("same operations, different results: %x vs %x", a, b)
	}
}

// FuzzSubmit drives the book with fuzzer-chosen operations — submissions of every kind, amends,
// cancels and rebuilds — and checks every invariant after each one.
func FuzzSubmit(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("a long seed that buys, sells, mints, burns and cancels its way through the book"))
	f.Add([]byte{10, 0, 0, 0, 1, 30, 10, 1, 1, 1, 1, 30, 90, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newSim(4)
		pos := 0
		pick := func(n int) int {
			if pos >= len(data) {
				return 0
			}
			v := int(data[pos]) % n
			pos++
			return v
		}
		for pos < len(data) {
			s.step(t, pick)
		}
	})
}
