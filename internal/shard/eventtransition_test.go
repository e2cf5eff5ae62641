package shard

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/market"
)

// TestEventTransitions moves events of 2 to 7 outcomes, whose every market alice and bob traded
// (alice YES at 30, bob NO at 70, outcome i's market i+1 pairs), and checks what each account and
// the exchange's remainder hold afterwards: a void pays ⌊100/n⌋ per YES and (n−1)·⌊100/n⌋ per NO
// and keeps the rest; a resolution pays 100 per winning share; every market moves with the event;
// a lone market of an event refuses to move.
func TestEventTransitions(t *testing.T) {
	for _, tc := range []struct {
		n      int
		action domain.EventAction
	}{
		{2, domain.EventAction{Action: domain.CancelMarket}},
		{3, domain.EventAction{Action: domain.CancelMarket}},
		{4, domain.EventAction{Action: domain.CancelMarket}},
		{7, domain.EventAction{Action: domain.CancelMarket}},
		{3, domain.EventAction{Action: domain.ResolveYes, Outcome: "o1"}},
		{4, domain.EventAction{Action: domain.ResolveYes, Outcome: "o0"}},
	} {
		t.Run(fmt.Sprintf("%d outcomes, %s", tc.n, tc.action), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			s := f.shard(t, "")
			spec := eventrec.Spec{Question: "Which one", Category: "test"}
			for i := range tc.n {
				spec.Outcomes = append(spec.Outcomes, event.Outcome{Key: fmt.Sprintf("o%d", i), Label: fmt.Sprintf("Number %d", i)})
			}
			e, _, err := eventrec.Record(ctx, f.st, uuid.Nil, "test/which", spec, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var pairs int64
			for i, o := range e.Outcomes {
				q := int64(i + 1)
				pairs += q
				for _, r := range []exchange.PlaceRequest{
					{Account: f.alice, Market: o.MarketID, Side: engine.Buy, Outcome: engine.Yes, Price: 30, Quantity: q},
					{Account: f.bob, Market: o.MarketID, Side: engine.Buy, Outcome: engine.No, Price: 70, Quantity: q},
				} {
					if _, err := s.Place(ctx, r); err != nil {
						t.Fatal(err)
					}
				}
			}
			// A resting order, cancelled by the move.
			if _, err := s.Place(ctx, exchange.PlaceRequest{Account: f.alice, Market: e.Outcomes[0].MarketID,
				Side: engine.Buy, Outcome: engine.Yes, Price: 10, Quantity: 5}); err != nil {
				t.Fatal(err)
			}
			if err := s.Transition(ctx, e.Outcomes[0].MarketID, domain.CloseMarket); !errors.Is(err, domain.ErrMarketInEvent) {
				t.Fatalf("closing a market of an event alone: %v, want market_in_event", err)
			}

			if err := s.TransitionEvent(ctx, e.ID, tc.action); err != nil {
				t.Fatal(err)
			}

			alice, bob := 100_000-30*pairs, 100_000-70*pairs
			var wantRemainder int64
			wantStatus := domain.MarketResolved
			if tc.action.Action == domain.CancelMarket {
				wantStatus = domain.MarketCanceled
				yes, no := event.VoidPayout(tc.n)
				alice += yes * pairs
				bob += no * pairs
				wantRemainder = 100*pairs - (yes+no)*pairs
			} else {
				for i, o := range e.Outcomes {
					if o.Key == tc.action.Outcome {
						alice += 100 * int64(i+1)
					} else {
						bob += 100 * int64(i+1)
					}
				}
			}
			for _, a := range []struct {
				id   int64
				want int64
			}{{f.alice, alice}, {f.bob, bob}} {
				var available, locked int64
				if err := f.st.Pool.QueryRow(ctx, `select available, locked from account_balances where id = $1`, a.id).Scan(&available, &locked); err != nil {
					t.Fatal(err)
				}
				if available != a.want || locked != 0 {
					t.Errorf("account %d holds %d available and %d locked, want %d and 0", a.id, available, locked, a.want)
				}
			}
			var remainder int64
			if err := f.st.Pool.QueryRow(ctx, `select coalesce(sum(amount), 0) from exchange_remainders where event_id = $1`, e.ID).Scan(&remainder); err != nil {
				t.Fatal(err)
			}
			if remainder != wantRemainder || alice+bob+remainder != 200_000 {
				t.Errorf("the exchange kept %d, want %d; the accounts hold %d of 200000", remainder, wantRemainder, alice+bob)
			}
			after, err := f.st.Event(ctx, e.ID)
			if err != nil || after.Status != wantStatus {
				t.Fatalf("event afterwards: %+v, %v", after, err)
			}
			markets, err := f.st.EventMarkets(ctx, after)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range markets {
				if m.Status != wantStatus {
					t.Errorf("market %q is %s, want %s", *m.OutcomeKey, m.Status, wantStatus)
				}
				if wantStatus == domain.MarketResolved {
					want := "NO"
					if *m.OutcomeKey == tc.action.Outcome {
						want = "YES"
					}
					if m.Outcome == nil || *m.Outcome != want {
						t.Errorf("market %q resolved %v, want %s", *m.OutcomeKey, m.Outcome, want)
					}
				}
			}
			if err := s.TransitionEvent(ctx, e.ID, domain.EventAction{Action: domain.ReopenMarket}); !errors.Is(err, market.ErrIllegalTransition) {
				t.Errorf("reopening a settled event: %v, want ErrIllegalTransition", err)
			}
		})
	}
}

// TestEventCloseAndReopen moves all of an event's markets, and refuses an unknown outcome and
// event with nothing changed.
func TestEventCloseAndReopen(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	e, _, err := eventrec.Record(ctx, f.st, uuid.Nil, "test/cr", eventrec.Spec{Question: "Which", Category: "test",
		Outcomes: []event.Outcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}, {Key: "c", Label: "C"}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	status := func(want domain.MarketStatus) {
		t.Helper()
		after, err := f.st.Event(ctx, e.ID)
		if err != nil || after.Status != want {
			t.Fatalf("event: %s, %v; want %s", after.Status, err, want)
		}
		ms, err := f.st.EventMarkets(ctx, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Status != want {
				t.Errorf("market %q is %s, want %s", *m.OutcomeKey, m.Status, want)
			}
		}
	}
	if err := s.TransitionEvent(ctx, e.ID, domain.EventAction{Action: domain.CloseMarket}); err != nil {
		t.Fatal(err)
	}
	status(domain.MarketClosed)
	if err := s.TransitionEvent(ctx, e.ID, domain.EventAction{Action: domain.ResolveYes, Outcome: "z"}); !errors.Is(err, event.ErrInvalidOutcomes) {
		t.Errorf("resolving to an unknown outcome: %v", err)
	}
	if err := s.TransitionEvent(ctx, uuid.New(), domain.EventAction{Action: domain.CloseMarket}); !errors.Is(err, domain.ErrEventNotFound) {
		t.Errorf("an unknown event: %v", err)
	}
	status(domain.MarketClosed)
	if err := s.TransitionEvent(ctx, e.ID, domain.EventAction{Action: domain.ReopenMarket}); err != nil {
		t.Fatal(err)
	}
	status(domain.MarketOpen)
}

// TestCloserClosesEvents: an event's closesAt closes all of its markets together through the
// Closer, which a lone market's close would refuse.
func TestCloserClosesEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	closes := time.Now().Add(time.Hour)
	e, _, err := eventrec.Record(ctx, f.st, uuid.Nil, "test/closer", eventrec.Spec{Question: "Which", Category: "test",
		ClosesAt: &closes, Outcomes: []event.Outcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := (&market.Closer{Store: f.st, Target: s}).CloseDue(ctx, closes.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	after, err := f.st.Event(ctx, e.ID)
	if err != nil || after.Status != domain.MarketClosed {
		t.Fatalf("event after its closesAt: %s, %v", after.Status, err)
	}
	ms, err := f.st.EventMarkets(ctx, after)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Status != domain.MarketClosed {
			t.Errorf("market %q is %s, want CLOSED", *m.OutcomeKey, m.Status)
		}
	}
}
