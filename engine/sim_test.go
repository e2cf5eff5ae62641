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
// from many accounts, cancels, account-wide cancels and rebuilds — and checks every invariant after
// each step. The property tests feed it a seeded PRNG, the fuzz target feeds it fuzzer bytes.
type sim struct {
	book     *Book
	ledger   *ledger
	accounts int
	nextID   OrderID
	ids      []OrderID // every id submitted; cancels pick from these, resting or not
	res      Result
	log      hash.Hash64 // digest of every outcome, for the determinism test
	stats    struct{ submits, fills, stp, cancels, refused int }
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
	case op < 75:
		s.submit(t, pick)
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
	// Prices cluster around a mid of 50 so that many orders cross; the edges get used too.
	if pick(10) == 0 {
		o.Price = MinPrice + pick(MaxPrice)
	} else {
		o.Price = 40 + pick(21)
	}
	if !s.ledger.reserve(o) {
		s.stats.refused++
		return
	}
	s.nextID++
	if err := s.book.Submit(o, &s.res); err != nil {
		t.Fatalf("submit %+v: %v", o, err)
	}
	s.ids = append(s.ids, o.ID)
	s.stats.submits++
	s.stats.fills += len(s.res.Fills)
	s.stats.stp += len(s.res.Cancelled)
	if err := checkResult(&o, &s.res); err != nil {
		t.Fatal(err)
	}
	s.ledger.apply(&s.res)
	fmt.Fprintln(s.log, "submit", s.res.Order, s.res.Fills, s.res.Cancelled)
}

// checkResult checks a submission's report against the order: fills at or better than its limit,
// never with itself, quantities adding up, and the final status matching.
func checkResult(o *Order, r *Result) error {
	var filled int64
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
		if c.Account != o.Account {
			return fmt.Errorf("order %d: STP cancelled another account's order %+v", o.ID, c)
		}
	}
	if r.Order.Filled != filled || r.Order.Status != status(o.Quantity, filled, false) {
		return fmt.Errorf("order %d: state %+v after fills of %d", o.ID, r.Order, filled)
	}
	return nil
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
			// A run that never traded, minted, burned or self-traded would prove little.
			if s.stats.fills == 0 || s.stats.stp == 0 || s.stats.cancels == 0 || s.ledger.pairs == 0 {
				t.Fatalf("sequence too tame: %+v, pairs %d", s.stats, s.ledger.pairs)
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

// FuzzSubmit drives the submission path with fuzzer-chosen operations and checks every invariant
// after each one.
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
