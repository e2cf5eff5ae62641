package shardclient

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestConvertOnOwner converts through the front's router on the shard owning an event's markets
// (POST /internal/v1/convert): the conversion and its retry, every refusal carried across with its
// code, and event_not_open once the event is closed.
func TestConvertOnOwner(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	rt := &Router{Store: r.st, Token: validateToken, Lifecycle: true}
	e, _, err := eventrec.Record(ctx, r.st, uuid.Nil, "test/conv", eventrec.Spec{Question: "Which", Category: "test",
		Outcomes: []event.Outcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}, {Key: "c", Label: "C"}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Register(ctx, "shard-1", strings.TrimPrefix(r.url, "http://"), ""); err != nil {
		t.Fatal(err)
	}
	for _, o := range e.Outcomes {
		if _, err := r.st.Assign(ctx, o.MarketID, "shard-1"); err != nil {
			t.Fatal(err)
		}
	}
	bob := storetest.Account(t, r.st, "bob", 1_000_000)
	for _, o := range e.Outcomes[:2] {
		for _, p := range []exchange.PlaceRequest{
			{Account: r.account, Market: o.MarketID, Side: engine.Buy, Outcome: engine.Yes, Price: 30, Quantity: 5},
			{Account: bob, Market: o.MarketID, Side: engine.Buy, Outcome: engine.No, Price: 70, Quantity: 5},
		} {
			if _, err := rt.Place(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	req := exchange.ConvertRequest{Account: bob, Event: e.ID, Outcomes: []string{"b", "a"}, Quantity: 3, ClientRequestID: "r1"}
	c, err := rt.Convert(ctx, req)
	if err != nil || c.Cash != 300 || c.AccountID != bob || c.ClientRequestID == nil || *c.ClientRequestID != "r1" {
		t.Fatalf("converting: %+v, %v", c, err)
	}
	if again, err := rt.Convert(ctx, req); err != nil || again.ID != c.ID {
		t.Fatalf("the retry: %+v, %v; want %s", again, err, c.ID)
	}
	for _, tc := range []struct {
		req  exchange.ConvertRequest
		want error
	}{
		{exchange.ConvertRequest{Account: bob, Event: e.ID, Outcomes: []string{"a"}, Quantity: 3}, domain.ErrInsufficientShares},
		{exchange.ConvertRequest{Account: bob, Event: e.ID, Outcomes: []string{"a", "a"}, Quantity: 1}, event.ErrInvalidOutcomes},
		{exchange.ConvertRequest{Account: bob, Event: e.ID, Outcomes: []string{"a"}, Quantity: 0}, event.ErrInvalidQuantity},
		{exchange.ConvertRequest{Account: bob, Event: uuid.New(), Outcomes: []string{"a"}, Quantity: 1}, domain.ErrEventNotFound},
		{exchange.ConvertRequest{Account: bob, Event: e.ID, Outcomes: []string{"a"}, Quantity: 1, ClientRequestID: "r1"}, domain.ErrClientRequestIDReused},
	} {
		if _, err := rt.Convert(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.req, err, tc.want)
		}
	}
	if err := rt.TransitionEvent(ctx, e.ID, domain.EventAction{Action: domain.CloseMarket}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Convert(ctx, exchange.ConvertRequest{Account: bob, Event: e.ID, Outcomes: []string{"a"}, Quantity: 1}); !errors.Is(err, domain.ErrEventNotOpen) {
		t.Fatalf("a closed event: %v, want event_not_open", err)
	}
}
