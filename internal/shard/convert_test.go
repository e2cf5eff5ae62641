package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
)

// newEvent records an event of n outcomes, keyed o0..o(n-1).
func (f *fixture) newEvent(t *testing.T, n int) records.Event {
	t.Helper()
	spec := eventrec.Spec{Question: "Which one", Category: "test"}
	for i := range n {
		spec.Outcomes = append(spec.Outcomes, event.Outcome{Key: fmt.Sprintf("o%d", i), Label: fmt.Sprintf("Number %d", i)})
	}
	e, _, err := eventrec.Record(context.Background(), f.st, uuid.Nil, "test/"+uuid.NewString()[:8], spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// holdings reads an account's shares (quantity, locked) of each of an event's markets, YES then NO.
func (f *fixture) holdings(t *testing.T, e records.Event, account int64) (yes, no, locked []int64) {
	t.Helper()
	for _, o := range e.Outcomes {
		var y, n, l int64
		if err := f.st.Pool.QueryRow(context.Background(), `select
			coalesce(sum(quantity) filter (where outcome = 'YES'), 0), coalesce(sum(quantity) filter (where outcome = 'NO'), 0),
			coalesce(sum(locked_quantity), 0) from positions where account_id = $1 and market_id = $2`, account, o.MarketID).Scan(&y, &n, &l); err != nil {
			t.Fatal(err)
		}
		yes, no, locked = append(yes, y), append(no, n), append(locked, l)
	}
	return yes, no, locked
}

func (f *fixture) wealth(t *testing.T, account int64) int64 {
	t.Helper()
	var available, locked int64
	if err := f.st.Pool.QueryRow(context.Background(), `select available, locked from account_balances where id = $1`, account).Scan(&available, &locked); err != nil {
		t.Fatal(err)
	}
	return available + locked
}

// holdNo has bob buy q NO shares of every outcome of e from alice (at 70; she buys YES at 30).
func (f *fixture) holdNo(t *testing.T, s *Shard, e records.Event, q int64) {
	t.Helper()
	for _, o := range e.Outcomes {
		for _, r := range []exchange.PlaceRequest{
			{Account: f.alice, Market: o.MarketID, Side: engine.Buy, Outcome: engine.Yes, Price: 30, Quantity: q},
			{Account: f.bob, Market: o.MarketID, Side: engine.Buy, Outcome: engine.No, Price: 70, Quantity: q},
		} {
			if _, err := s.Place(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestConvertEffect converts k of an event's n outcomes, for every k, and checks bob's shares and
// cash afterwards: the listed NO gone, YES of every other outcome, (k − 1) × 100 × q cents.
func TestConvertEffect(t *testing.T) {
	const n, q = 4, 3
	for k := 1; k <= n; k++ {
		t.Run(fmt.Sprintf("%d of %d", k, n), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			s := f.shard(t, "")
			e := f.newEvent(t, n)
			f.holdNo(t, s, e, 5)
			before := f.wealth(t, f.bob)
			var listed []string
			for i := range k {
				listed = append(listed, e.Outcomes[n-1-i].Key) // listed out of the event's order
			}
			c, err := s.Convert(ctx, exchange.ConvertRequest{Account: f.bob, Event: e.ID, Outcomes: listed, Quantity: q})
			if err != nil {
				t.Fatal(err)
			}
			if c.Cash != int64(k-1)*100*q || c.Quantity != q || !slices.Equal(c.Outcomes, listed) {
				t.Errorf("conversion %+v, want cash %d", c, (k-1)*100*q)
			}
			if got := f.wealth(t, f.bob); got != before+int64(k-1)*100*q {
				t.Errorf("bob holds %d cents, want %d", got, before+int64(k-1)*100*q)
			}
			yes, no, _ := f.holdings(t, e, f.bob)
			for i, o := range e.Outcomes {
				wantYes, wantNo := int64(q), int64(5)
				if slices.Contains(listed, o.Key) {
					wantYes, wantNo = 0, 5-q
				}
				if yes[i] != wantYes || no[i] != wantNo {
					t.Errorf("outcome %s: bob holds %d YES and %d NO, want %d and %d", o.Key, yes[i], no[i], wantYes, wantNo)
				}
			}
			var rows int
			if err := f.st.Pool.QueryRow(ctx, `select count(*) from conversions where account_id = $1 and event_id = $2`, f.bob, e.ID).Scan(&rows); err != nil || rows != 1 {
				t.Errorf("conversions rows: %d, %v; want 1", rows, err)
			}
		})
	}
}

// TestConvertRefusals checks every refusal, each leaving bob's shares and cash as they were, and
// a retry by client request id.
func TestConvertRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.shard(t, "")
	e := f.newEvent(t, 3)
	other := f.newEvent(t, 3)
	f.holdNo(t, s, e, 5)
	// 2 of bob's NO of o0 are locked by a resting SELL.
	if _, err := s.Place(ctx, exchange.PlaceRequest{Account: f.bob, Market: e.Outcomes[0].MarketID, Side: engine.Sell,
		Outcome: engine.No, Price: 99, Quantity: 2}); err != nil {
		t.Fatal(err)
	}
	yes0, no0, locked0 := f.holdings(t, e, f.bob)
	cash0 := f.wealth(t, f.bob)
	unchanged := func(t *testing.T) {
		t.Helper()
		yes, no, locked := f.holdings(t, e, f.bob)
		if !slices.Equal(yes, yes0) || !slices.Equal(no, no0) || !slices.Equal(locked, locked0) || f.wealth(t, f.bob) != cash0 {
			t.Errorf("bob's holdings changed: YES %v NO %v locked %v cash %d, were %v %v %v %d", yes, no, locked, f.wealth(t, f.bob), yes0, no0, locked0, cash0)
		}
	}
	req := func(outcomes []string, q int64) exchange.ConvertRequest {
		return exchange.ConvertRequest{Account: f.bob, Event: e.ID, Outcomes: outcomes, Quantity: q}
	}
	for _, tc := range []struct {
		name string
		req  exchange.ConvertRequest
		want string
	}{
		{"more than held", req([]string{"o1"}, 6), domain.ErrInsufficientShares.Code},
		{"shares a SELL locks", req([]string{"o0"}, 4), domain.ErrInsufficientShares.Code},
		{"one of two short", req([]string{"o1", "o0"}, 4), domain.ErrInsufficientShares.Code},
		{"alice holds no NO", exchange.ConvertRequest{Account: f.alice, Event: e.ID, Outcomes: []string{"o1"}, Quantity: 1}, domain.ErrInsufficientShares.Code},
		{"unknown outcome", req([]string{"o9"}, 1), event.ErrInvalidOutcomes.Code},
		{"repeated outcome", req([]string{"o1", "o1"}, 1), event.ErrInvalidOutcomes.Code},
		{"no outcome", req(nil, 1), event.ErrInvalidOutcomes.Code},
		{"zero quantity", req([]string{"o1"}, 0), event.ErrInvalidQuantity.Code},
		{"too much", req([]string{"o1"}, engine.MaxQuantity+1), event.ErrInvalidQuantity.Code},
		{"unknown event", exchange.ConvertRequest{Account: f.bob, Event: uuid.New(), Outcomes: []string{"o1"}, Quantity: 1}, domain.ErrEventNotFound.Code},
		{"another event's shares", exchange.ConvertRequest{Account: f.bob, Event: other.ID, Outcomes: []string{"o1"}, Quantity: 1}, domain.ErrInsufficientShares.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Convert(ctx, tc.req)
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
			unchanged(t)
		})
	}

	t.Run("risk limit", func(t *testing.T) {
		f.setLimits(t, f.bob, 4, -1) // bob holds no YES: converting 5 would pass 4
		_, err := s.Convert(ctx, req([]string{"o1"}, 5))
		if riskField(err) != "maxPosition" {
			t.Fatalf("got %v, want risk_limit_exceeded on maxPosition", err)
		}
		unchanged(t)
		f.setLimits(t, f.bob, -1, -1)
	})

	t.Run("retry", func(t *testing.T) {
		r := req([]string{"o1", "o2"}, 1)
		r.ClientRequestID = "c-1"
		first, err := s.Convert(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		yes1, no1, _ := f.holdings(t, e, f.bob)
		cash1 := f.wealth(t, f.bob)
		again, err := s.Convert(ctx, r)
		if err != nil || again.ID != first.ID || again.Cash != first.Cash {
			t.Fatalf("retry: %+v, %v; want %+v", again, err, first)
		}
		yes, no, _ := f.holdings(t, e, f.bob)
		if !slices.Equal(yes, yes1) || !slices.Equal(no, no1) || f.wealth(t, f.bob) != cash1 {
			t.Errorf("the retry changed bob's holdings")
		}
		r.Quantity = 2
		if _, err := s.Convert(ctx, r); !errors.Is(err, domain.ErrClientRequestIDReused) {
			t.Fatalf("reusing the id for another conversion: %v, want client_request_id_reused", err)
		}
		yes0, no0, cash0 = yes1, no1, cash1
		unchanged(t)
	})

	t.Run("event not open", func(t *testing.T) {
		if err := s.TransitionEvent(ctx, e.ID, domain.EventAction{Action: domain.CloseMarket}); err != nil {
			t.Fatal(err)
		}
		// Closing cancels the resting SELL, unlocking its shares.
		yes0, no0, locked0 = f.holdings(t, e, f.bob)
		cash0 = f.wealth(t, f.bob)
		if _, err := s.Convert(ctx, req([]string{"o1"}, 1)); !errors.Is(err, domain.ErrEventNotOpen) {
			t.Fatalf("got %v, want event_not_open", err)
		}
		unchanged(t)
	})
}
