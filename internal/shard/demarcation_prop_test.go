package shard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// The package's external tests drive shards through their exported API only, so that they may
// use package exchangetest (which imports package shard) for the SQL invariants.

// propShard is a live named shard of the demarcation property test.
type propShard struct {
	name        string
	s           *shard.Shard
	incarnation uuid.UUID
}

// TestPropertyDemarcation is the property test of the demarcation protocol (docs/architecture.md
// §11, issue 53): three named shards, each the holder of its own allocations of five accounts'
// cash (three of them poor, so that shards run short and must acquire from the wallet and from
// each other), trade four plain markets and an event's three. A seeded generator drives, one step
// at a time, placements (BUY and SELL, some IOC, prices that cross), cancels, conversions of the
// event's NO shares, settlements of markets and of the event (replaced by new ones), changes of
// the accounts' maxLockedCash, planned handoffs (Shard.HandOff, TakeOver) and failovers: a shard
// stopped (it returns what it holds), or abandoned as a crashed process is (its allocations stay
// behind, for the others to take), its markets assigned to the others, and a new shard started in
// its place. One kind of step overlaps: a burst of a poor account's BUYs sent at once to every
// shard, so that the shards' acquires race (a refusal in it is judged against the account's free
// cash and locks before the burst less what the burst's placements that passed took). After every
// step it checks:
//
//   - the invariants of docs/architecture.md §3 and §11 (exchangetest.Invariants): cash conserved
//     over wallets, allocations, locks and shares, every allocation non-negative, Σ room + locks ≤
//     maxLockedCash (or no room);
//   - a placement refused for funds only when the account's whole free cash (its wallet and every
//     holder's allocation, read right before the step) was less than what the order locks, and
//     refused on maxLockedCash only when its locks and the order's lock passed the limit;
//   - an account's locks over its limit never grew (the one way over is a limit lowered below
//     them).
func TestPropertyDemarcation(t *testing.T) {
	const seed, steps = 2, 400 // seed 2's bursts met the race of TestRoomTakenAfterCashExhausted
	ctx := context.Background()
	st := storetest.New(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	accounts := []int64{
		storetest.Account(t, st, "rich-1", 100_000), storetest.Account(t, st, "rich-2", 50_000),
		storetest.Account(t, st, "poor-1", 3_000), storetest.Account(t, st, "poor-2", 2_000),
		storetest.Account(t, st, "poor-3", 1_200),
	}
	limits := map[int64]int64{} // maxLockedCash, -1 for none
	for _, a := range accounts {
		limits[a] = -1
	}

	// The shards: live ones, and every one started (stopped at the end; an abandoned one is
	// stopped only then, as a crashed process's allocations stay until others take them).
	var live []*propShard
	started := 0
	start := func() *propShard {
		name := fmt.Sprintf("prop-%d", started)
		started++
		s := shard.New(shard.Config{Store: st, Name: name, Spread: 3, Logger: quiet})
		t.Cleanup(s.Stop)
		inc, err := st.Register(ctx, name, name+":8090", "")
		if err != nil {
			t.Fatal(err)
		}
		p := &propShard{name: name, s: s, incarnation: inc}
		live = append(live, p)
		return p
	}
	for range 3 {
		start()
	}

	var ev eventrecEvent // the event of the moment (newEvent)
	// Fee schedules (docs/fees.md): every other market and every event is listed with one, and
	// every 25 steps one market's changes (a deterministic turn, so that the random choices stay
	// those the seed was picked for); orders resting keep theirs.
	schedules := []engine.Fees{{Taker: 700, Maker: -175}, {Taker: 2500, Maker: 1000}, {Taker: 10000, Maker: -10000}, {}}
	turn := 0
	nextFees := func() engine.Fees { turn++; return schedules[turn%len(schedules)] }
	fees := map[uuid.UUID]engine.Fees{} // markets' own
	var eventFees engine.Fees
	setFees := func(m uuid.UUID, f engine.Fees) {
		t.Helper()
		if _, err := st.SetMarketFees(ctx, m, &f, time.Now()); err != nil {
			t.Fatal(err)
		}
		fees[m] = f
	}
	feesOf := func(m uuid.UUID) engine.Fees {
		if f, ok := fees[m]; ok {
			return f
		}
		if slices.Contains(ev.markets, m) {
			return eventFees
		}
		return engine.Fees{}
	}
	lockOf := func(p exchange.PlaceRequest) int64 {
		o := engine.Order{Side: p.Side, Outcome: p.Outcome, Price: p.Price, Quantity: p.Quantity, Fees: feesOf(p.Market)}
		cash, _ := o.Lock()
		return cash
	}

	// owner records which live shard serves each market; an event's markets share one.
	owner := map[uuid.UUID]*propShard{}
	var plain []uuid.UUID
	assign := func(m uuid.UUID, p *propShard) int64 {
		t.Helper()
		o, err := st.Assign(ctx, m, p.name)
		if err != nil {
			t.Fatal(err)
		}
		owner[m] = p
		return o.Epoch
	}
	newMarket := func() {
		m := storetest.Market(t, st)
		plain = append(plain, m)
		if len(plain)%2 == 0 {
			setFees(m, nextFees())
		}
		assign(m, live[rng.IntN(len(live))])
	}
	for range 4 {
		newMarket()
	}
	newEvent := func() {
		spec := eventrec.Spec{Question: "Which one", Category: "test"}
		for i := range 3 {
			spec.Outcomes = append(spec.Outcomes, event.Outcome{Key: fmt.Sprintf("o%d", i), Label: fmt.Sprintf("Number %d", i)})
		}
		e, _, err := eventrec.Record(ctx, st, uuid.Nil, "prop/"+uuid.NewString()[:8], spec, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ev = eventrecEvent{id: e.ID}
		eventFees = nextFees()
		if _, err := st.SetEventFees(ctx, e.ID, &eventFees, time.Now()); err != nil {
			t.Fatal(err)
		}
		p := live[rng.IntN(len(live))]
		for _, o := range e.Outcomes {
			ev.markets, ev.keys = append(ev.markets, o.MarketID), append(ev.keys, o.Key)
			assign(o.MarketID, p)
		}
	}
	newEvent()
	allMarkets := func() []uuid.UUID { return append(slices.Clone(plain), ev.markets...) }

	// What the checks read before a step.
	free := func(a int64) (cash, locked int64) {
		t.Helper()
		if err := st.Pool.QueryRow(ctx, `select available, locked from account_balances where id = $1`, a).Scan(&cash, &locked); err != nil {
			t.Fatal(err)
		}
		return cash, locked
	}
	locks := func() map[int64]int64 {
		t.Helper()
		out := map[int64]int64{}
		for _, a := range accounts {
			_, out[a] = free(a)
		}
		return out
	}

	var (
		refusedFunds, refusedLimit, placed, fills, conversions, cancels int
		settled, handoffs, stops, crashes, limitChanges, fromOthers     int
		bursts, halted                                                  int
	)
	before := locks()
	// The trades that paid fees and the rebates among them.
	feeTrades := func() (paid, rebates int) {
		if err := st.Pool.QueryRow(ctx, `select count(*) filter (where taker_fee > 0 or maker_fee > 0), count(*) filter (where maker_fee < 0)
			from trades`).Scan(&paid, &rebates); err != nil {
			t.Fatal(err)
		}
		return paid, rebates
	}
	// exercised says whether the run has met every part of the protocol it is meant to: the
	// bursts' concurrent batches make each run's path its own, so a run short of one goes on, up
	// to three times its steps, before it is judged.
	exercised := func() bool {
		feesPaid, rebates := feeTrades()
		return refusedFunds >= 5 && refusedLimit >= 5 && fills >= 10 && conversions > 0 && handoffs > 0 && stops+crashes >= 2 &&
			bursts > 0 && fromOthers > 0 && feesPaid > 0 && rebates > 0 && halted > 0
	}
	ran := 0
	for step := 0; step < steps || step < 3*steps && !exercised(); step++ {
		ran++
		var what string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, step %d (%s): %s", seed, step, what, fmt.Sprintf(format, args...))
		}
		// Every 25 steps a plain market's schedule changes; every 50, the first plain market is
		// paused for 10 steps (its placements refused, market_halted).
		if step%25 == 0 {
			setFees(plain[step/25%len(plain)], nextFees())
		}
		if step%50 == 10 || step%50 == 20 {
			if _, err := st.SetMarketPaused(ctx, plain[0], step%50 == 10, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		switch k := rng.IntN(100); {
		case k < 62: // a placement, in the event's markets as often as in the plain ones
			a := accounts[rng.IntN(len(accounts))]
			m := plain[rng.IntN(len(plain))]
			if rng.IntN(2) == 0 {
				m = ev.markets[rng.IntN(len(ev.markets))]
			}
			p := exchange.PlaceRequest{Account: a, Market: m, Side: engine.Buy, Outcome: engine.Yes,
				Price: 30 + rng.IntN(41), Quantity: 1 + rng.Int64N(12)}
			if rng.IntN(4) == 0 {
				p.Side = engine.Sell
			}
			if rng.IntN(2) == 0 {
				p.Outcome = engine.No
			}
			if rng.IntN(5) == 0 {
				p.TimeInForce = engine.IOC
			}
			what = fmt.Sprintf("place %+v on %s", p, owner[m].name)
			cash, locked := free(a)
			var wallet, own int64
			if err := st.Pool.QueryRow(ctx, `select a.available, coalesce((select al.available from allocations al
				where al.account_id = a.id and al.holder = $2), 0) from accounts a where a.id = $1`, a, owner[m].name).Scan(&wallet, &own); err != nil {
				t.Fatal(err)
			}
			need := int64(0)
			if p.Side == engine.Buy {
				need = lockOf(p)
			}
			got, err := owner[m].s.Place(ctx, p)
			var de *domain.Error
			switch {
			case err == nil:
				placed++
				if need > own+wallet {
					fromOthers++ // paid for with cash another holder held
				}
				if got.FilledQuantity > 0 {
					fills++
				}
			case errors.Is(err, domain.ErrInsufficientFunds):
				refusedFunds++
				if cash >= need {
					fail("refused for funds, while the account's free cash (wallet and every allocation) was %d, the order locks %d", cash, need)
				}
			case errors.As(err, &de) && de.Code == domain.RiskLimitCode:
				if de.Field != "maxLockedCash" {
					fail("refused on %s, a limit the test never sets: %v", de.Field, err)
				}
				refusedLimit++
				if l := limits[a]; l < 0 || locked+need <= l {
					fail("refused on maxLockedCash %d, while the account locked %d and the order locks %d", l, locked, need)
				}
			case errors.Is(err, domain.ErrInsufficientShares):
			case errors.Is(err, domain.ErrMarketHalted):
				halted++
			default:
				fail("%v", err)
			}
		case k < 76: // a cancel of a resting order, at its market's owner
			var m uuid.UUID
			var seq, a int64
			err := st.Pool.QueryRow(ctx, `select market_id, seq, account_id from orders
				where status in ('OPEN', 'PARTIALLY_FILLED') order by market_id, seq offset $1 limit 1`,
				rng.IntN(20)).Scan(&m, &seq, &a)
			if err != nil { // fewer resting orders than the offset
				continue
			}
			what = fmt.Sprintf("cancel %s/%d of %d on %s", m, seq, a, owner[m].name)
			if _, err := owner[m].s.Cancel(ctx, exchange.CancelRequest{Account: a, Market: m, Seq: seq}); err != nil {
				fail("%v", err)
			}
			cancels++
		case k < 84: // a conversion of NO shares of the event's outcomes the account holds
			a := accounts[rng.IntN(len(accounts))]
			var held []string
			for i, m := range ev.markets {
				var q int64
				if err := st.Pool.QueryRow(ctx, `select coalesce(sum(quantity - locked_quantity), 0) from positions
					where account_id = $1 and market_id = $2 and outcome = 'NO'`, a, m).Scan(&q); err != nil {
					t.Fatal(err)
				}
				if q > 0 {
					held = append(held, ev.keys[i])
				}
			}
			if len(held) == 0 {
				continue
			}
			req := exchange.ConvertRequest{Account: a, Event: ev.id, Outcomes: held, Quantity: 1}
			what = fmt.Sprintf("convert %+v on %s", req, owner[ev.markets[0]].name)
			if _, err := owner[ev.markets[0]].s.Convert(ctx, req); err != nil {
				fail("%v", err)
			}
			conversions++
		case k < 88: // a change of an account's maxLockedCash, a third of them to none
			a := accounts[rng.IntN(len(accounts))]
			l := int64(rng.IntN(4500)) - 1500
			var c *int64
			if l >= 0 {
				c = &l
			} else {
				l = -1
			}
			what = fmt.Sprintf("maxLockedCash of %d: %d", a, l)
			if _, err := st.SetRiskLimits(ctx, a, nil, c); err != nil {
				fail("%v", err)
			}
			limits[a] = l
			limitChanges++
		case k < 90: // a settlement: a plain market, or the event, replaced by a new one
			if rng.IntN(3) == 0 {
				action := domain.EventAction{Action: domain.ResolveYes, Outcome: ev.keys[rng.IntN(len(ev.keys))]}
				if rng.IntN(3) == 0 {
					action = domain.EventAction{Action: domain.CancelMarket}
				}
				what = fmt.Sprintf("event %s: %s on %s", ev.id, action, owner[ev.markets[0]].name)
				if err := owner[ev.markets[0]].s.TransitionEvent(ctx, ev.id, action); err != nil {
					fail("%v", err)
				}
				newEvent()
			} else {
				i := rng.IntN(len(plain))
				m := plain[i]
				action := []domain.MarketAction{domain.ResolveYes, domain.ResolveNo, domain.CancelMarket}[rng.IntN(3)]
				what = fmt.Sprintf("market %s: %s on %s", m, action, owner[m].name)
				if err := owner[m].s.Transition(ctx, m, action); err != nil {
					fail("%v", err)
				}
				plain = slices.Delete(plain, i, i+1)
				delete(owner, m)
				newMarket()
			}
			settled++
		case k < 94: // a planned handoff of a market, or of the event's markets together
			from := live[rng.IntN(len(live))]
			var ms []uuid.UUID
			for _, m := range plain {
				if owner[m] == from {
					ms = append(ms, m)
				}
			}
			if len(ms) > 0 && rng.IntN(3) > 0 {
				ms = ms[rng.IntN(len(ms)):][:1]
			} else if owner[ev.markets[0]] == from {
				ms = slices.Clone(ev.markets)
			} else {
				continue
			}
			to := live[rng.IntN(len(live))]
			if to == from {
				continue
			}
			what = fmt.Sprintf("hand %v from %s to %s", ms, from.name, to.name)
			// the target must have beaten lately (bookkeeping.HandoffTargetTTL)
			if err := st.Beat(ctx, to.name, to.name+":8090", to.incarnation); err != nil {
				fail("%v", err)
			}
			epochs, err := from.s.HandOff(ctx, ms, to.name)
			if err != nil {
				fail("%v", err)
			}
			if err := to.s.TakeOver(ctx, ms, epochs); err != nil {
				fail("taking over: %v", err)
			}
			for _, m := range ms {
				owner[m] = to
			}
			handoffs++
		case k < 98: // a burst: one poor account's BUYs, at once, on every shard
			a := accounts[2+rng.IntN(3)]
			ms := allMarkets()
			burst := make([]exchange.PlaceRequest, 4+rng.IntN(8))
			for i := range burst {
				burst[i] = exchange.PlaceRequest{Account: a, Market: ms[rng.IntN(len(ms))], Side: engine.Buy, Outcome: engine.Yes,
					Price: 30 + rng.IntN(41), Quantity: 1 + rng.Int64N(12)}
				if rng.IntN(2) == 0 {
					burst[i].Outcome = engine.No
				}
			}
			what = fmt.Sprintf("a burst of %d BUYs of %d", len(burst), a)
			cash, locked := free(a)
			errs := make([]error, len(burst))
			var wg sync.WaitGroup
			for i, p := range burst {
				wg.Go(func() { _, errs[i] = owner[p.Market].s.Place(ctx, p) })
			}
			wg.Wait()
			// Only the burst's own placements took the account's free cash or grew its locks
			// meanwhile (a fill at a better price, a resting order its own cancelled, give back):
			// a refusal is due only if what was left after those that passed fell short.
			var took int64
			for i, p := range burst {
				if errs[i] == nil {
					placed++
					took += lockOf(p) // at most: a resting BUY gives back its taker fee's reserve beyond its maker's
				}
			}
			for i, p := range burst {
				need := lockOf(p)
				var de *domain.Error
				switch err := errs[i]; {
				case err == nil:
				case errors.Is(err, domain.ErrInsufficientFunds):
					refusedFunds++
					if cash-took >= need {
						fail("%+v refused for funds, while the account's free cash was %d before the burst, its placements that passed took %d, and the order locks %d (the burst's answers: %v)",
							p, cash, took, need, errs)
					}
				case errors.As(err, &de) && de.Code == domain.RiskLimitCode && de.Field == "maxLockedCash":
					refusedLimit++
					if l := limits[a]; l < 0 || locked+took+need <= l {
						fail("%+v refused on maxLockedCash %d, while the account locked %d before the burst, its placements that passed %d more, and the order locks %d (free cash %d; the burst's answers: %v)",
							p, l, locked, took, need, cash, errs)
					}
				case errors.Is(err, domain.ErrMarketHalted):
					halted++
				default:
					fail("%+v: %v", p, err)
				}
			}
			bursts++
		default: // a failover: a shard stopped or crashed, its markets on the others, a new one started
			i := rng.IntN(len(live))
			gone := live[i]
			crash := rng.IntN(2) == 0
			what = fmt.Sprintf("failover of %s (crash %v)", gone.name, crash)
			if crash {
				crashes++ // left running, fenced by the epochs Assign moves its markets to; its allocations stay
			} else {
				stops++
				gone.s.Stop() // returns what it holds to the wallets
			}
			live = slices.Delete(live, i, i+1)
			// The heirs load the markets as their next heartbeat would (a market a shard handed
			// away and now gets back by assignment must be loaded afresh): here, at once.
			heir := live[rng.IntN(len(live))] // the event's
			type takeOver struct {
				markets []uuid.UUID
				epochs  []int64
			}
			moved := map[*propShard]*takeOver{}
			for _, m := range allMarkets() {
				if owner[m] != gone {
					continue
				}
				to := live[rng.IntN(len(live))]
				if slices.Contains(ev.markets, m) {
					to = heir
				}
				if moved[to] == nil {
					moved[to] = &takeOver{}
				}
				moved[to].markets = append(moved[to].markets, m)
				moved[to].epochs = append(moved[to].epochs, assign(m, to))
			}
			for to, o := range moved {
				if err := to.s.TakeOver(ctx, o.markets, o.epochs); err != nil {
					fail("%s taking over: %v", to.name, err)
				}
			}
			start()
		}

		if err := exchangetest.Invariants(ctx, st.Pool); err != nil {
			t.Fatalf("seed %d, step %d (%s): %v", seed, step, what, err)
		}
		after := locks()
		for _, a := range accounts {
			if l := limits[a]; l >= 0 && after[a] > l && after[a] > before[a] {
				t.Fatalf("seed %d, step %d (%s): account %d's locks grew from %d to %d, over its maxLockedCash %d",
					seed, step, what, a, before[a], after[a], l)
			}
		}
		before = after
	}

	for _, p := range live {
		if err := p.s.CheckBooks(ctx); err != nil {
			t.Errorf("%s's books: %v", p.name, err)
		}
	}
	t.Logf("seed %d, %d steps: %d placed (%d with fills), %d refused for funds, %d on maxLockedCash, %d cancels, "+
		"%d conversions, %d settlements, %d limit changes, %d handoffs, %d stops, %d crashes, %d bursts; %d placements paid with another holder's cash",
		seed, ran, placed, fills, refusedFunds, refusedLimit, cancels, conversions, settled, limitChanges, handoffs,
		stops, crashes, bursts, fromOthers)
	feesPaid, rebates := feeTrades()
	t.Logf("%d trades paid fees, %d paid a maker a rebate; %d placements refused by a halt", feesPaid, rebates, halted)
	if !exercised() {
		t.Errorf("the run did not exercise the protocol: see the counts above")
	}
}

// eventrecEvent is the test's event: its id, and its markets and outcome keys in order.
type eventrecEvent struct {
	id      uuid.UUID
	markets []uuid.UUID
	keys    []string
}
