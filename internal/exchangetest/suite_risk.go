package exchangetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/kit/auth"
)

// Self-set risk limits (GET and PUT /account/risk-limits; internal/shard/risk.go): the bounds of a
// change, what each refusal looks like, that a refused order changes nothing (its feed included),
// amends up and down, batches answered per placement, and a limit lowered below use.

// riskLimits reads c's account's limits and use.
func riskLimits(t *testing.T, c *Client) apiserver.RiskLimits {
	t.Helper()
	var r apiserver.RiskLimits
	c.Expect(t, "GET", "/account/risk-limits", nil, http.StatusOK, &r)
	return r
}

// setRiskLimits sets c's account's limits; a negative limit is null.
func setRiskLimits(t *testing.T, c *Client, maxPosition, maxLockedCash int64) apiserver.RiskLimits {
	t.Helper()
	body := map[string]any{"maxPosition": nil, "maxLockedCash": nil}
	if maxPosition >= 0 {
		body["maxPosition"] = maxPosition
	}
	if maxLockedCash >= 0 {
		body["maxLockedCash"] = maxLockedCash
	}
	var r apiserver.RiskLimits
	c.Expect(t, "PUT", "/account/risk-limits", body, http.StatusOK, &r)
	return r
}

// riskState is what a refused order must leave as it was: the account's cash, its open orders
// and positions, and its feed's last number.
func riskState(t *testing.T, c *Client) string {
	t.Helper()
	available, locked := c.Balance(t)
	var orders struct{ Orders []apiserver.Order }
	c.Expect(t, "GET", "/orders?status=OPEN", nil, http.StatusOK, &orders)
	open := 0
	for _, o := range orders.Orders {
		open += int(o.Quantity-o.FilledQuantity) * o.Price
	}
	var seq int64
	if err := c.T.Store.Pool.QueryRow(context.Background(), `select event_seq from accounts where uid = $1`, c.Account).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("available %d, locked %d, %d open orders worth %d, positions %v, feed at %d",
		available, locked, len(orders.Orders), open, c.Positions(t), seq)
}

// refusedByRisk sends a request that a risk limit must refuse (400 risk_limit_exceeded naming
// field), and checks that nothing changed.
func refusedByRisk(t *testing.T, c *Client, path string, body any, field string) {
	t.Helper()
	before := riskState(t, c)
	e := c.ExpectError(t, "POST", path, body, http.StatusBadRequest, "risk_limit_exceeded")
	if e.Details.Field != field {
		t.Errorf("POST %s %v: refused on %q (%s), want %s", path, body, e.Details.Field, e.Error, field)
	}
	if after := riskState(t, c); after != before {
		t.Errorf("POST %s %v was refused but changed the account: %s, was %s", path, body, after, before)
	}
}

func testRiskLimits(t *testing.T, tg *Target) {
	m, m2 := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "risk"), tg.NewAccount(t, "risk")

	// None at first; refused changes change nothing.
	if r := riskLimits(t, a); r.MaxPosition != nil || r.MaxLockedCash != nil || r.Used.Position != 0 ||
		r.Used.PositionMarketID != nil || r.Used.PositionOutcome != nil || r.Used.LockedCash != 0 {
		t.Fatalf("a new account's risk limits: %+v, want none and nothing used", r)
	}
	for _, bad := range []struct {
		body        string
		code, field string
	}{
		{`{"maxPosition": -1}`, "out_of_range", "maxPosition"},
		{`{"maxLockedCash": 9007199254740992}`, "out_of_range", "maxLockedCash"},
		{`{"maxPosition": 1.5}`, "not_an_integer", "maxPosition"},
		{`{"maxLockedCash": "10"}`, "invalid_type", "maxLockedCash"},
		{`{"maxPosition": 1, "maxPosition": 2}`, "duplicate_key", "maxPosition"},
		{`[1]`, "malformed_json", ""},
	} {
		e := a.ExpectError(t, "PUT", "/account/risk-limits", json.RawMessage(bad.body), http.StatusBadRequest, bad.code)
		if e.Details.Field != bad.field {
			t.Errorf("PUT %s: field %q, want %q", bad.body, e.Details.Field, bad.field)
		}
	}
	reader := tg.AddKey(t, a, auth.KeySpec{Scope: auth.ScopeRead})
	reader.ExpectError(t, "PUT", "/account/risk-limits", map[string]any{"maxPosition": 1}, http.StatusForbidden, "insufficient_scope")
	if r := riskLimits(t, reader); r.MaxPosition != nil || r.MaxLockedCash != nil {
		t.Fatalf("refused changes set limits: %+v", r)
	}

	// Both limits; the answer shows them.
	if r := setRiskLimits(t, a, 10, 1000); r.MaxPosition == nil || *r.MaxPosition != 10 || r.MaxLockedCash == nil || *r.MaxLockedCash != 1000 {
		t.Fatalf("PUT answered %+v", r)
	}

	// maxPosition: YES and NO count apart, each held plus open BUYs.
	six := a.Place(t, m.ID, "BUY", "YES", 40, 6)                                       // YES 6, locked 240
	refusedByRisk(t, a, "/order", OrderBody(m.ID, "BUY", "YES", 40, 5), "maxPosition") // YES would be 11
	refusedByRisk(t, a, "/order", withFields(OrderBody(m.ID, "BUY", "YES", 1, 5), map[string]any{"timeInForce": "IOC"}),
		"maxPosition") // an IOC could fill it all
	a.Place(t, m.ID, "BUY", "NO", 10, 8)          // NO 8, locked 320
	four := a.Place(t, m.ID, "BUY", "YES", 40, 4) // YES 10, locked 480

	// maxLockedCash: across markets.
	refusedByRisk(t, a, "/order", OrderBody(m2.ID, "BUY", "YES", 55, 10), "maxLockedCash") // 1030
	a.Place(t, m2.ID, "BUY", "YES", 50, 9)                                                 // locked 930
	r := riskLimits(t, a)
	if r.Used.Position != 10 || r.Used.PositionMarketID == nil || *r.Used.PositionMarketID != m.ID ||
		r.Used.PositionOutcome == nil || *r.Used.PositionOutcome != "YES" || r.Used.LockedCash != 930 {
		t.Fatalf("used: %+v, want a YES position of 10 in %s and 930 locked", r.Used, m.ID)
	}

	// Amends: up refused on the limit it adds to, down passes.
	refusedByRisk(t, a, "/order/amend", map[string]any{"orderId": six.ID, "quantity": 7}, "maxPosition")
	refusedByRisk(t, a, "/order/amend", map[string]any{"orderId": four.ID, "price": 60}, "maxLockedCash")     // 1010
	a.Expect(t, "POST", "/order/amend", map[string]any{"orderId": six.ID, "quantity": 3}, http.StatusOK, nil) // YES 7, locked 810

	// A batch answers each placement on its own (in one market, in order).
	var batch struct {
		Results []struct {
			Status  int
			Details struct{ Code, Field string }
		}
	}
	a.Expect(t, "POST", "/orders/batch", map[string]any{"orders": []any{
		OrderBody(m.ID, "BUY", "YES", 40, 4), // YES 11
		OrderBody(m.ID, "BUY", "YES", 40, 3), // YES 10, locked 930
		OrderBody(m.ID, "BUY", "NO", 40, 2),  // NO 10, locked 1010
		OrderBody(m.ID, "BUY", "NO", 35, 2),  // NO 10, locked 1000
	}}, http.StatusCreated, &batch)
	want := []struct {
		status int
		field  string
	}{{400, "maxPosition"}, {201, ""}, {400, "maxLockedCash"}, {201, ""}}
	for i, w := range want {
		got := batch.Results[i]
		if got.Status != w.status || got.Details.Field != w.field || (w.field != "") != (got.Details.Code == "risk_limit_exceeded") {
			t.Errorf("batch placement %d: %d %+v, want %d %s", i, got.Status, got.Details, w.status, w.field)
		}
	}
	if _, locked := a.Balance(t); locked != 1000 {
		t.Fatalf("locked %d after the batch, want 1000", locked)
	}

	// b fills the 3 left of six at 40: a then holds 3 YES, its position unchanged.
	b.Place(t, m.ID, "BUY", "NO", 60, 3)
	if p := a.Positions(t)[m.ID.String()+"/YES"]; p.Quantity != 3 {
		t.Fatalf("a holds %d YES, want 3", p.Quantity)
	}
	if r := riskLimits(t, a); r.Used.Position != 10 || r.Used.LockedCash != 880 {
		t.Fatalf("used after a fill: %+v, want position 10 and 880 locked", r.Used)
	}

	// Lowered below use: only what adds to a limit is refused.
	setRiskLimits(t, a, 5, 500)
	refusedByRisk(t, a, "/order", OrderBody(m.ID, "BUY", "YES", 1, 1), "maxPosition")
	refusedByRisk(t, a, "/order", OrderBody(tg.NewMarket(t, nil).ID, "BUY", "YES", 1, 1), "maxLockedCash")
	refusedByRisk(t, a, "/order/amend", map[string]any{"orderId": four.ID, "price": 41}, "maxLockedCash")
	var sold apiserver.PlacedOrder
	a.Expect(t, "POST", "/order", OrderBody(m.ID, "SELL", "YES", 90, 3), http.StatusCreated, &sold)
	a.Expect(t, "POST", "/order/amend", map[string]any{"orderId": four.ID, "quantity": 1}, http.StatusOK, nil)
	a.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": four.ID}, http.StatusOK, nil)
	a.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": sold.ID}, http.StatusOK, nil)

	// Removed: what was refused passes.
	if r := setRiskLimits(t, a, -1, -1); r.MaxPosition != nil || r.MaxLockedCash != nil {
		t.Fatalf("limits removed: %+v", r)
	}
	a.Place(t, m.ID, "BUY", "YES", 40, 20)
	a.Expect(t, "PUT", "/account/risk-limits", map[string]any{"maxLockedCash": 0}, http.StatusOK, nil) // absent: no maxPosition
	refusedByRisk(t, a, "/order", OrderBody(m2.ID, "BUY", "YES", 1, 1), "maxLockedCash")
	a.Expect(t, "PUT", "/account/risk-limits", map[string]any{}, http.StatusOK, nil)
	CheckInvariants(t, tg)
}
