package exchangetest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/poll"
)

// testHalts: a market's pause, an event's and the exchange's halt refuse placements and amends
// with a 409 naming the halt, and change nothing; cancels and cancel-everything go on, resting
// orders stay, other markets trade; GET /market says what halts it; resuming lets trading go on.
func testHalts(t *testing.T, tg *Target) {
	m, other := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	a := tg.NewAccount(t, "halt")
	rest := a.Place(t, m.ID, "BUY", "YES", 40, 5)
	second := a.Place(t, m.ID, "BUY", "YES", 30, 2)
	halted := func(id uuid.UUID, want string) {
		t.Helper()
		var got apiserver.Market
		a.Expect(t, "GET", "/market?marketId="+id.String(), nil, http.StatusCreated, &got)
		if got.Halted != want {
			t.Fatalf("GET /market of %s: halted %q, want %q", id, got.Halted, want)
		}
	}
	refused := func(market uuid.UUID, orderID uuid.UUID, code string) {
		t.Helper()
		before := state(t, a)
		a.ExpectError(t, "POST", "/order", OrderBody(market, "BUY", "YES", 41, 1), http.StatusConflict, code)
		if orderID != uuid.Nil {
			a.ExpectError(t, "POST", "/order/amend", map[string]any{"orderId": orderID, "price": 42}, http.StatusConflict, code)
		}
		var res struct{ Results []struct{ Status int } }
		a.Expect(t, "POST", "/orders/batch", map[string]any{"orders": []any{OrderBody(market, "BUY", "YES", 41, 1)}}, http.StatusCreated, &res)
		if len(res.Results) != 1 || res.Results[0].Status != http.StatusConflict {
			t.Fatalf("a batch's placement in a halted market: %+v, want one 409", res)
		}
		if after := state(t, a); after != before {
			t.Fatalf("refused placements and amends (%s) changed %s to %s", code, before, after)
		}
	}

	// lifecycle waits for the lifecycle channel to tell the market's halt (or resume: "").
	f := a.DialFeed(t)
	defer f.Close()
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "lifecycle"})
	f.ExpectReply(t, "subscribed", "")
	lifecycle := func(id uuid.UUID, want string) {
		t.Helper()
		change := "halted"
		if want == "" {
			change = "resumed"
		}
		for range 10_000 {
			msg := f.Next(t, 30*time.Second)
			if msg.Type == "market" && msg.MarketID == id.String() && msg.Change == change {
				if msg.Halted != want || msg.Status != "OPEN" {
					t.Fatalf("the lifecycle channel told market %s %s: %s", id, change, msg.Raw)
				}
				return
			}
		}
		t.Fatalf("the lifecycle channel never told market %s %s", id, change)
	}

	// A market paused on its own.
	halted(m.ID, "")
	if got := tg.Markets.Pause(t, m.ID, true); got.Halted != "market" || got.Status != "OPEN" {
		t.Fatalf("paused: halted %q, status %s; want market and OPEN", got.Halted, got.Status)
	}
	halted(m.ID, "market")
	lifecycle(m.ID, "market")
	refused(m.ID, rest.ID, "market_halted")
	var cancelled apiserver.Order
	a.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": second.ID}, http.StatusOK, &cancelled)
	if cancelled.Status != "CANCELLED" {
		t.Fatalf("a cancel in a halted market: %+v", cancelled)
	}
	if o := getOrder(t, a, rest.ID); o.Status != "OPEN" || o.Price != 40 {
		t.Fatalf("the resting order of a halted market: %+v, want it OPEN at 40", o)
	}
	halted(other.ID, "")
	a.Place(t, other.ID, "BUY", "YES", 20, 1) // another market trades
	tg.Markets.Pause(t, m.ID, true)           // again: no change
	if got := tg.Markets.Pause(t, m.ID, false); got.Halted != "" {
		t.Fatalf("resumed: halted %q", got.Halted)
	}
	lifecycle(m.ID, "")
	a.Place(t, m.ID, "BUY", "YES", 41, 1)
	a.Expect(t, "POST", "/order/amend", map[string]any{"orderId": rest.ID, "price": 42}, http.StatusOK, nil)

	// The whole exchange.
	var h apiserver.ExchangeHalt
	tg.Admin(t, "GET", "/admin/v1/halt", nil, http.StatusOK, &h)
	if h.Halted {
		t.Fatalf("the exchange is halted before the test halts it")
	}
	// A GTD order's expiry is a cancel: it goes on through the halt.
	expires := time.Now().Add(2 * time.Second).UTC()
	gtd := placeWith(t, a, other.ID, "BUY", "YES", 15, 1, map[string]any{"timeInForce": "GTD", "expiresAt": expires.Format(time.RFC3339Nano)}, http.StatusCreated)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			tg.Admin(t, "PUT", "/admin/v1/halt", map[string]any{"halted": false}, http.StatusOK, nil)
		}
	})
	tg.Admin(t, "PUT", "/admin/v1/halt", map[string]any{"halted": true}, http.StatusOK, &h)
	if !h.Halted || h.Since.IsZero() {
		t.Fatalf("PUT /admin/v1/halt true: %+v", h)
	}
	halted(other.ID, "exchange")
	lifecycle(other.ID, "exchange")
	refused(other.ID, uuid.Nil, "exchange_halted")
	refused(m.ID, rest.ID, "exchange_halted")
	var expired apiserver.Order
	if err := poll.Until(context.Background(), 10*time.Second, func(context.Context) (bool, error) {
		expired = getOrder(t, a, gtd.ID)
		return expired.Status != "OPEN", nil
	}); err != nil {
		t.Fatalf("a GTD order past its time while the exchange is halted is still %s", expired.Status)
	}
	expectReason(t, "a GTD order past its time while the exchange is halted", expired, "CANCELLED", "EXPIRED")
	a.Expect(t, "POST", "/cancel-everything", nil, http.StatusOK, nil)
	tg.Admin(t, "PUT", "/admin/v1/halt", map[string]any{"halted": false}, http.StatusOK, &h)
	resumed = true
	if h.Halted {
		t.Fatalf("PUT /admin/v1/halt false: %+v", h)
	}
	halted(other.ID, "")
	a.Place(t, other.ID, "BUY", "YES", 21, 1)

	// An event: every market of it.
	ev := tg.events().Create(t, "x", "y")
	x := ev.Outcomes[0].MarketID
	if got := tg.events().Pause(t, ev.ID, true); got.Halted != "event" {
		t.Fatalf("a paused event: halted %q", got.Halted)
	}
	halted(x, "event")
	lifecycle(x, "event")
	refused(x, uuid.Nil, "event_halted")
	tg.events().Pause(t, ev.ID, false)
	halted(x, "")
	a.Place(t, x, "BUY", "YES", 10, 1)

	if tg.AdminMarkets {
		testAdminHaltRefusals(t, tg, m.ID, ev.ID)
	}
}

// testAdminHaltRefusals: the admin API's halts refuse a missing token, a malformed or unknown id
// and a malformed body.
func testAdminHaltRefusals(t *testing.T, tg *Target, market, event uuid.UUID) {
	for _, action := range []string{"pause", "resume"} {
		for _, kind := range []struct{ path, notFound string }{{"/admin/v1/markets/", "market_not_found"}, {"/admin/v1/events/", "event_not_found"}} {
			var e ErrorBody
			id := market
			if kind.notFound == "event_not_found" {
				id = event
			}
			tg.AdminAs(t, "", "POST", kind.path+id.String()+"/"+action, nil, http.StatusUnauthorized, nil)
			tg.Admin(t, "POST", kind.path+"42/"+action, nil, http.StatusBadRequest, &e)
			if e.Details.Code != "invalid_uuid" {
				t.Errorf("%s of id 42: %+v", action, e)
			}
			tg.Admin(t, "POST", kind.path+uuid.NewString()+"/"+action, nil, http.StatusNotFound, &e)
			if e.Details.Code != kind.notFound {
				t.Errorf("%s %s of an unknown id: %+v", action, kind.path, e)
			}
		}
	}
	tg.AdminAs(t, "", "GET", "/admin/v1/halt", nil, http.StatusUnauthorized, nil)
	tg.AdminAs(t, "", "PUT", "/admin/v1/halt", map[string]any{"halted": true}, http.StatusUnauthorized, nil)
	for _, body := range []any{map[string]any{}, map[string]any{"halted": "yes"}} {
		var e ErrorBody
		tg.Admin(t, "PUT", "/admin/v1/halt", body, http.StatusBadRequest, &e)
		if e.Details.Field != "halted" {
			t.Errorf("PUT /admin/v1/halt %v: %+v, want a refusal of halted", body, e)
		}
	}
	var h apiserver.ExchangeHalt
	tg.Admin(t, "GET", "/admin/v1/halt", nil, http.StatusOK, &h)
	if h.Halted {
		t.Errorf("refused halts halted the exchange")
	}
}
