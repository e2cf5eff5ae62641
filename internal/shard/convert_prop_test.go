package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestConvertLedgerProperty mixes random placements (BUY and SELL of either outcome in every
// book), conversions and cancels by three accounts, then resolves or voids the event, checking
// after every step the event's ledger (event.Totals.Check): whichever outcome won, the exchange
// would pay exactly the collateral it holds, the cash the accounts no longer have. At the end
// every position is settled and the accounts hold all the cash there is but what a void keeps on
// the exchange's account: the payout was the collateral.
func TestConvertLedgerProperty(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			s := f.shard(t, "")
			r := rand.New(rand.NewPCG(seed, 36))
			n := 2 + int(seed) // 2 to 7 outcomes
			e := f.newEvent(t, n)
			accounts := []int64{f.alice, f.bob, storetest.Account(t, f.st, "carol", 100_000)}
			const granted = 300_000
			check := func(step string) int64 {
				t.Helper()
				var cash, remainder int64
				if err := f.st.Pool.QueryRow(ctx, `select sum(available + locked) from account_balances where id = any($1)`, accounts).Scan(&cash); err != nil {
					t.Fatal(err)
				}
				if err := f.st.Pool.QueryRow(ctx, `select coalesce(sum(amount), 0) from exchange_remainders where event_id = $1`, e.ID).Scan(&remainder); err != nil {
					t.Fatal(err)
				}
				collateral := granted - cash - remainder
				if err := f.totals(t, e).Check(collateral); err != nil {
					t.Fatalf("after %s: %v", step, err)
				}
				return collateral
			}
			// Every account starts with NO shares of every outcome, and alice with YES too.
			for _, o := range e.Outcomes {
				for _, a := range accounts[1:] {
					for _, p := range []exchange.PlaceRequest{
						{Account: f.alice, Market: o.MarketID, Side: engine.Buy, Outcome: engine.Yes, Price: 40, Quantity: 4},
						{Account: a, Market: o.MarketID, Side: engine.Buy, Outcome: engine.No, Price: 60, Quantity: 4},
					} {
						if _, err := s.Place(ctx, p); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			check("the first trades")
			var conversions int
			for step := range 80 {
				account := accounts[r.IntN(len(accounts))]
				i := r.IntN(n)
				switch k := r.IntN(10); {
				case k < 3: // a conversion of a random set of outcomes
					var listed []string
					for _, j := range r.Perm(n)[:1+r.IntN(n)] {
						listed = append(listed, e.Outcomes[j].Key)
					}
					_, err := s.Convert(ctx, exchange.ConvertRequest{Account: account, Event: e.ID, Outcomes: listed, Quantity: 1 + r.Int64N(3)})
					if err == nil {
						conversions++
					} else if !errors.Is(err, domain.ErrInsufficientShares) {
						t.Fatalf("step %d: converting %v: %v", step, listed, err)
					}
				default: // a placement, which may rest, trade or be refused
					side := engine.Buy
					if r.IntN(3) == 0 {
						side = engine.Sell
					}
					outcome := engine.Yes
					if r.IntN(2) == 0 {
						outcome = engine.No
					}
					_, err := s.Place(ctx, exchange.PlaceRequest{Account: account, Market: e.Outcomes[i].MarketID, Side: side,
						Outcome: outcome, Price: 20 + r.IntN(61), Quantity: 1 + r.Int64N(5)})
					var de *domain.Error
					if err != nil && !errors.As(err, &de) {
						t.Fatalf("step %d: placing: %v", step, err)
					}
				}
				check(fmt.Sprintf("step %d", step))
			}
			if conversions == 0 {
				t.Fatal("no conversion was done: the property was not exercised")
			}
			action := domain.EventAction{Action: domain.CancelMarket}
			if seed%2 == 1 { // odd seeds resolve, even ones void
				action = domain.EventAction{Action: domain.ResolveYes, Outcome: e.Outcomes[r.IntN(n)].Key}
			}
			if err := s.TransitionEvent(ctx, e.ID, action); err != nil {
				t.Fatal(err)
			}
			if c := check(action.String()); c != 0 {
				t.Errorf("after %s the exchange still holds %d cents of collateral: the payout was not the collateral", action, c)
			}
			t.Logf("%d outcomes, %d conversions, %s", n, conversions, action)
		})
	}
}

// totals reads an event's shares outstanding.
func (f *fixture) totals(t *testing.T, e records.Event) event.Totals {
	t.Helper()
	tot := event.Totals{YES: make([]int64, len(e.Outcomes)), NO: make([]int64, len(e.Outcomes))}
	for i, o := range e.Outcomes {
		if err := f.st.Pool.QueryRow(context.Background(), `select
			coalesce(sum(quantity) filter (where outcome = 'YES'), 0), coalesce(sum(quantity) filter (where outcome = 'NO'), 0)
			from positions where market_id = $1`, o.MarketID).Scan(&tot.YES[i], &tot.NO[i]); err != nil {
			t.Fatal(err)
		}
	}
	return tot
}
