package main

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/client"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestPlanFor checks the arithmetic: a set is traded only when the bids sum over 100 or the asks
// under what a set pays (100, or n × ⌊100/n⌋ should the event be cancelled) by the edge, never
// past the thinnest best level or the size, and never with an outcome's side empty.
func TestPlanFor(t *testing.T) {
	bk := func(bid, bidQty, ask, askQty int) Book { return Book{Bid: Level{bid, bidQty}, Ask: Level{ask, askQty}} }
	four := func(b Book) []Book { return []Book{b, b, b, b} }
	for _, tc := range []struct {
		name  string
		books []Book
		edge  int
		want  Plan // zero: none
	}{
		{"bids sum to 100", four(bk(25, 10, 26, 10)), 1, Plan{}},
		{"asks sum to 100", four(bk(24, 10, 25, 10)), 1, Plan{}},
		{"bids sum to 110", []Book{bk(35, 3, 40, 9), bk(25, 10, 26, 10), bk(25, 10, 26, 10), bk(25, 10, 26, 10)}, 1,
			Plan{Direction: SellSets, Sets: 3, Profit: 10, Prices: []int{65, 75, 75, 75}}},
		{"bids over by less than the edge", []Book{bk(27, 3, 40, 9), bk(25, 10, 26, 10), bk(25, 10, 26, 10), bk(25, 10, 26, 10)}, 3, Plan{}},
		{"bids over by the edge", []Book{bk(28, 3, 40, 9), bk(25, 10, 26, 10), bk(25, 10, 26, 10), bk(25, 10, 26, 10)}, 3,
			Plan{Direction: SellSets, Sets: 3, Profit: 3, Prices: []int{72, 75, 75, 75}}},
		{"asks sum to 90", []Book{bk(10, 5, 20, 2), bk(10, 5, 20, 7), bk(10, 5, 25, 9), bk(10, 5, 25, 9)}, 1,
			Plan{Direction: BuySets, Sets: 2, Profit: 10, Prices: []int{20, 20, 25, 25}}},
		{"depth past the size", four(bk(30, 50, 40, 50)), 1, Plan{Direction: SellSets, Sets: 5, Profit: 20, Prices: []int{70, 70, 70, 70}}},
		{"an outcome without a bid", []Book{bk(0, 0, 40, 9), bk(50, 10, 60, 10), bk(50, 10, 60, 10), bk(50, 10, 60, 10)}, 1, Plan{}},
		{"an outcome without an ask", []Book{bk(5, 9, 0, 0), bk(10, 5, 20, 10), bk(10, 5, 20, 10), bk(10, 5, 20, 10)}, 1, Plan{}},
		// Three outcomes: a cancelled event pays 33 a YES share, so a set costing 99 or more is no
		// profit whatever happens, though it pays 100 at resolution.
		{"3 outcomes at 99", []Book{bk(10, 5, 33, 5), bk(10, 5, 33, 5), bk(10, 5, 33, 5)}, 1, Plan{}},
		{"3 outcomes at 98", []Book{bk(10, 5, 32, 5), bk(10, 5, 33, 5), bk(10, 5, 33, 5)}, 1,
			Plan{Direction: BuySets, Sets: 5, Profit: 1, Prices: []int{32, 33, 33}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found := PlanFor(tc.books, tc.edge, 5)
			if found != (tc.want.Direction != 0) || found && (got.Direction != tc.want.Direction || got.Sets != tc.want.Sets ||
				got.Profit != tc.want.Profit || !slices.Equal(got.Prices, tc.want.Prices)) {
				t.Errorf("PlanFor = %+v, %v; want %+v", got, found, tc.want)
			}
		})
	}
}

// arbRun is one run of an Arb in the background: its looks at the books, its log, and its end.
type arbRun struct {
	a      *Arb
	looks  chan Plan // each look's plan (Direction 0: none)
	log    *bytes.Buffer
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, a *Arb) *arbRun {
	t.Helper()
	r := &arbRun{a: a, looks: make(chan Plan, 1000), log: &bytes.Buffer{}, done: make(chan error, 1)}
	a.Log = slog.New(slog.NewTextHandler(lockedWriter{r}, nil))
	a.Recheck = 200 * time.Millisecond
	a.checked = func(p Plan, found bool) {
		if !found {
			p = Plan{}
		}
		select {
		case r.looks <- p:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

type lockedWriter struct{ r *arbRun }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.log.Write(p)
}

// look waits for the next look at the books.
func (r *arbRun) look(t *testing.T) Plan {
	t.Helper()
	select {
	case p := <-r.looks:
		return p
	case <-time.After(15 * time.Second):
		t.Fatal("the arb did not look at the books within 15 s")
		return Plan{}
	}
}

// stop stops the run with Ctrl-C's cancellation and checks it ended cleanly, saying so.
func (r *arbRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("the arb ended with %v", err)
	}
	r.done <- nil // for the cleanup
	r.mu.Lock()
	defer r.mu.Unlock()
	if !strings.Contains(r.log.String(), "msg=stopped cancelled=0") {
		t.Errorf("the arb did not say it stopped:\n%s", r.log)
	}
}

// state is an account as the arb's checks read it: its cash, locked cash included, what it holds
// of each market and outcome, and how many orders it ever placed.
func state(t *testing.T, c *client.Client) (cash int, held map[string]int, orders int) {
	t.Helper()
	ctx := context.Background()
	acct, err := c.Account(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := c.Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held = map[string]int{}
	for _, p := range ps {
		if p.Quantity != 0 {
			held[p.MarketID.String()+"/"+string(p.Outcome)] = p.Quantity
		}
	}
	page, err := c.Orders(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return acct.Available + acct.Locked, held, len(page.Orders)
}

func newArb(t *testing.T, tg *exchangetest.Target, event uuid.UUID) *Arb {
	t.Helper()
	c, err := client.New(tg.URL+"/api/v1", tg.NewAccount(t, "arb").Key)
	if err != nil {
		t.Fatal(err)
	}
	return &Arb{C: c, Event: event, Edge: 1, Size: 5, MaxSets: 10}
}

// TestArbSellsSets runs the Arb against pmx dev on an event of four outcomes whose books other
// accounts make: while the YES bids sum to 100 it does nothing; when one bid rises to make them
// 110 (3 shares deep), a dry run only says so; the real run buys 3 NO of every outcome, converts
// them, and ends with 3 × 10 cents more cash and nothing held — the profit realized at once — and
// then, the bids at 100 again, trades no more.
func TestArbSellsSets(t *testing.T) {
	tg := exchangetest.StartDev(t)
	ev := exchangetest.AdminEvents{T: tg}.Create(t, "a", "b", "c", "d")
	maker := tg.NewAccount(t, "maker")
	for _, o := range ev.Outcomes { // YES bid 25 and ask 26 on every outcome: bids sum to 100
		maker.Place(t, o.MarketID, "BUY", "YES", 25, 10)
		maker.Place(t, o.MarketID, "BUY", "NO", 74, 10)
	}
	a := newArb(t, tg, ev.ID)

	r := start(t, a)
	if p := r.look(t); p.Direction != 0 {
		t.Fatalf("bids summing to 100: the arb planned %+v", p)
	}
	r.stop(t)
	if cash, held, orders := state(t, a.C); cash != exchangetest.Grant || len(held) != 0 || orders != 0 {
		t.Fatalf("bids summing to 100: the arb traded (cash %d, holds %v, %d orders)", cash, held, orders)
	}

	maker.Place(t, ev.Outcomes[0].MarketID, "BUY", "YES", 35, 3) // bids now sum to 110, 3 deep
	a.DryRun = true
	r = start(t, a)
	want := Plan{Direction: SellSets, Sets: 3, Profit: 10, Prices: []int{65, 75, 75, 75}}
	if p := r.look(t); p.Direction != want.Direction || p.Sets != want.Sets || p.Profit != want.Profit || !slices.Equal(p.Prices, want.Prices) {
		t.Fatalf("the dry run planned %+v, want %+v", p, want)
	}
	r.stop(t)
	if cash, held, orders := state(t, a.C); cash != exchangetest.Grant || len(held) != 0 || orders != 0 {
		t.Fatalf("the dry run traded (cash %d, holds %v, %d orders)", cash, held, orders)
	}

	a.DryRun = false
	r = start(t, a)
	poll.Wait(t, 15*time.Second, "the arb's 30 cents of profit", func() bool {
		cash, _, _ := state(t, a.C)
		return cash == exchangetest.Grant+30
	})
	for p := r.look(t); p.Direction != 0; p = r.look(t) { // bounded by look's timeout: the edge is gone
	}
	r.stop(t)
	cash, held, orders := state(t, a.C)
	if cash != exchangetest.Grant+30 || len(held) != 0 || orders != len(ev.Outcomes) {
		t.Fatalf("after the trade: cash %d (want %d), holds %v (want nothing), %d orders (want %d)",
			cash, exchangetest.Grant+30, held, orders, len(ev.Outcomes))
	}
	if a.traded != 3 || a.profit != 30 {
		t.Errorf("the arb counted %d sets and %d cents, want 3 and 30", a.traded, a.profit)
	}
}

// TestArbBuysSets runs the Arb on an event of three outcomes whose YES asks sum to 95, 2 deep:
// it buys 2 YES of every outcome for 190, which pays 200 when the event resolves (and 198 were it
// cancelled), and stops at -max-sets.
func TestArbBuysSets(t *testing.T) {
	tg := exchangetest.StartDev(t)
	ev := exchangetest.AdminEvents{T: tg}.Create(t, "x", "y", "z")
	maker := tg.NewAccount(t, "maker")
	for i, o := range ev.Outcomes { // YES asks 30, 30 and 35
		maker.Place(t, o.MarketID, "BUY", "NO", []int{70, 70, 65}[i], 2)
		maker.Place(t, o.MarketID, "BUY", "YES", 10, 5)
	}
	a := newArb(t, tg, ev.ID)
	a.MaxSets = 2
	r := start(t, a)
	select {
	case err := <-r.done: // done at -max-sets
		r.done <- err
	case <-time.After(15 * time.Second):
		t.Fatal("the arb did not stop at -max-sets within 15 s")
	}
	r.stop(t)
	cash, held, _ := state(t, a.C)
	if cash != exchangetest.Grant-190 || len(held) != 3 {
		t.Fatalf("after buying 2 sets at 95: cash %d, holds %v", cash, held)
	}
	for _, o := range ev.Outcomes {
		if q := held[o.MarketID.String()+"/YES"]; q != 2 {
			t.Errorf("holds %d YES of %s, want 2", q, o.Key)
		}
	}
	exchangetest.AdminEvents{T: tg}.Resolve(t, ev.ID, "y")
	if cash, held, _ := state(t, a.C); cash != exchangetest.Grant+10 || len(held) != 0 {
		t.Fatalf("after resolution: cash %d (want %d: 2 sets × 5 cents), holds %v", cash, exchangetest.Grant+10, held)
	}
}
