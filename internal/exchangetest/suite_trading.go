package exchangetest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

func testTrades(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	maker, taker := tg.NewAccount(t, "trades"), tg.NewAccount(t, "trades")
	maker.Place(t, m.ID, "BUY", "YES", 50, 60)
	for i := range 55 {
		o := taker.Place(t, m.ID, "BUY", "NO", 50+i%3, 1) // executes at NO 50 whatever its limit
		if len(o.Trades) != 1 || o.Trades[0].Price != 50 || o.Trades[0].YesPrice != 50 || o.Trades[0].Side != "BUY" || o.Trades[0].Outcome != "NO" {
			t.Fatalf("placement %d: %+v", i, o)
		}
	}
	var trades []apiserver.Trade
	taker.Expect(t, "GET", "/market/trades?marketId="+m.ID.String(), nil, http.StatusOK, &trades)
	if len(trades) != 50 {
		t.Fatalf("%d trades by default, want 50", len(trades))
	}
	taker.Expect(t, "GET", "/market/trades?marketId="+m.ID.String()+"&limit=500", nil, http.StatusOK, &trades)
	if len(trades) != 55 {
		t.Fatalf("%d trades with limit 500, want 55", len(trades))
	}
	for i := 1; i < len(trades); i++ {
		if trades[i].CreatedAt.After(trades[i-1].CreatedAt) {
			t.Fatalf("trades not newest first at %d", i)
		}
	}
	taker.Expect(t, "GET", "/market/trades?marketId="+m.ID.String()+"&limit=3", nil, http.StatusOK, &trades)
	if len(trades) != 3 {
		t.Fatalf("%d trades with limit 3", len(trades))
	}
	taker.ExpectError(t, "GET", "/market/trades?marketId="+m.ID.String()+"&limit=501", nil, http.StatusBadRequest, "out_of_range")
	taker.ExpectError(t, "GET", "/market/trades?marketId="+m.ID.String()+"&limit=0", nil, http.StatusBadRequest, "out_of_range")
	taker.ExpectError(t, "GET", "/market/trades?marketId=x", nil, http.StatusBadRequest, "invalid_uuid")
	taker.ExpectError(t, "GET", "/market/trades?marketId="+uuid.NewString(), nil, http.StatusBadRequest, "market_not_found")
}

// state is what a bad request must leave as it was.
func state(t *testing.T, c *Client) string {
	avail, locked := c.Balance(t)
	var orders struct{ Orders []apiserver.Order }
	c.Expect(t, "GET", "/orders", nil, http.StatusOK, &orders)
	return fmt.Sprint(avail, locked, c.Positions(t), len(orders.Orders))
}

func testBadOrders(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	closed := tg.NewMarket(t, nil)
	tg.Markets.Close(t, closed.ID)
	c := tg.NewAccount(t, "bad")
	c.Place(t, m.ID, "BUY", "YES", 10, 5)
	id := m.ID.String()
	body := func(fields string) string {
		return `{"marketId":"` + id + `",` + fields + `}`
	}
	tests := []struct {
		name, body, code, field string
	}{
		{"malformed JSON", `{"marketId":`, "malformed_json", ""},
		{"not an object", `[]`, "malformed_json", ""},
		{"empty body", ``, "malformed_json", ""},
		{"missing side", body(`"outcome":"YES","price":50,"quantity":1`), "missing_field", "side"},
		{"side wrong case", body(`"side":"buy","outcome":"YES","price":50,"quantity":1`), "invalid_value", "side"},
		{"outcome unknown", body(`"side":"BUY","outcome":"MAYBE","price":50,"quantity":1`), "invalid_value", "outcome"},
		{"price a string", body(`"side":"BUY","outcome":"YES","price":"50","quantity":1`), "invalid_type", "price"},
		{"price fractional", body(`"side":"BUY","outcome":"YES","price":50.5,"quantity":1`), "not_an_integer", "price"},
		{"price 0", body(`"side":"BUY","outcome":"YES","price":0,"quantity":1`), "out_of_range", "price"},
		{"price 100", body(`"side":"BUY","outcome":"YES","price":100,"quantity":1`), "out_of_range", "price"},
		{"quantity 0", body(`"side":"BUY","outcome":"YES","price":50,"quantity":0`), "out_of_range", "quantity"},
		{"quantity fractional", body(`"side":"BUY","outcome":"YES","price":50,"quantity":1.5`), "not_an_integer", "quantity"},
		{"quantity over the limit", body(`"side":"BUY","outcome":"YES","price":50,"quantity":1000001`), "out_of_range", "quantity"},
		{"price a fraction close to 10", body(`"side":"BUY","outcome":"YES","price":9.99999999999999999,"quantity":1`), "not_an_integer", "price"},
		{"quantity a fraction close to 1", body(`"side":"BUY","outcome":"YES","price":50,"quantity":0.99999999999999999999`), "not_an_integer", "quantity"},
		{"price twice", body(`"side":"BUY","outcome":"YES","price":1000,"quantity":1,"price":10`), "duplicate_key", "price"},
		{"a key twice in an ignored field", body(`"side":"BUY","outcome":"YES","price":50,"quantity":1,"note":{"a":1,"a":2}`), "duplicate_key", "a"},
		{"bad market id", `{"marketId":"123","side":"BUY","outcome":"YES","price":50,"quantity":1}`, "invalid_uuid", "marketId"},
		{"unknown market", `{"marketId":"` + uuid.NewString() + `","side":"BUY","outcome":"YES","price":50,"quantity":1}`, "market_not_found", "marketId"},
		{"market closed", `{"marketId":"` + closed.ID.String() + `","side":"BUY","outcome":"YES","price":50,"quantity":1}`, "market_not_open", "marketId"},
		{"not enough cash", body(`"side":"BUY","outcome":"YES","price":99,"quantity":1000000`), "insufficient_funds", "quantity"},
		{"no shares to sell", body(`"side":"SELL","outcome":"NO","price":50,"quantity":1`), "insufficient_shares", "quantity"},
		{"oversized body", body(`"side":"BUY","outcome":"YES","price":50,"quantity":1,"pad":"` + strings.Repeat("x", 70_000) + `"`), "body_too_large", ""},
	}
	before := state(t, c)
	for _, tt := range tests {
		e := c.ExpectError(t, "POST", "/order", tt.body, http.StatusBadRequest, tt.code)
		if e.Details.Field != tt.field {
			t.Errorf("%s: field %q, want %q", tt.name, e.Details.Field, tt.field)
		}
		if after := state(t, c); after != before {
			t.Fatalf("%s changed the account: %s, was %s", tt.name, after, before)
		}
	}
}

func testMatchKinds(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b, c := tg.NewAccount(t, "kinds"), tg.NewAccount(t, "kinds"), tg.NewAccount(t, "kinds")
	key := m.ID.String()

	// Mint: a BUY YES @60 meets b BUY NO @40: a pays 600, b pays 400, 10 pairs exist.
	a.Place(t, m.ID, "BUY", "YES", 60, 10)
	o := b.Place(t, m.ID, "BUY", "NO", 40, 10)
	expectFill(t, o, "FILLED", 10, 40, 60)
	expectCash(t, a, Grant-600, 0)
	expectCash(t, b, Grant-400, 0)
	expectShares(t, a, key+"/YES", 10, 0)
	expectShares(t, b, key+"/NO", 10, 0)

	// Transfer YES: a SELL YES @65 ×4 meets c BUY YES @65: a gets 260.
	a.Place(t, m.ID, "SELL", "YES", 65, 4)
	expectShares(t, a, key+"/YES", 10, 4)
	o = c.Place(t, m.ID, "BUY", "YES", 65, 4)
	expectFill(t, o, "FILLED", 4, 65, 65)
	expectCash(t, a, Grant-600+260, 0)
	expectCash(t, c, Grant-260, 0)
	expectShares(t, a, key+"/YES", 6, 0)
	expectShares(t, c, key+"/YES", 4, 0)

	// Transfer NO: b SELL NO @45 ×3 meets c BUY NO @45.
	b.Place(t, m.ID, "SELL", "NO", 45, 3)
	o = c.Place(t, m.ID, "BUY", "NO", 45, 3)
	expectFill(t, o, "FILLED", 3, 45, 55)
	expectCash(t, b, Grant-400+135, 0)
	expectCash(t, c, Grant-260-135, 0)
	expectShares(t, b, key+"/NO", 7, 0)

	// Burn: c SELL YES @50 ×3 (a YES ask at 50) meets b SELL NO @50 (a YES bid at 50): c gets 150,
	// b gets 150, three pairs are retired.
	c.Place(t, m.ID, "SELL", "YES", 50, 3)
	o = b.Place(t, m.ID, "SELL", "NO", 50, 3)
	expectFill(t, o, "FILLED", 3, 50, 50)
	expectCash(t, c, Grant-260-135+150, 0)
	expectCash(t, b, Grant-400+135+150, 0)
	expectShares(t, c, key+"/YES", 1, 0)
	expectShares(t, b, key+"/NO", 4, 0)
	CheckInvariants(t, tg)
}

func expectFill(t *testing.T, o apiserver.PlacedOrder, status string, qty int64, price, yes int) {
	t.Helper()
	if o.Status != status || o.FilledQuantity != qty || len(o.Trades) != 1 || o.Trades[0].Price != price ||
		o.Trades[0].YesPrice != yes || o.Trades[0].Quantity != qty || o.Trades[0].Side != o.Side || o.Trades[0].Outcome != o.Outcome {
		t.Fatalf("placement %+v, want %s with one fill of %d at %d (YES %d)", o, status, qty, price, yes)
	}
}

func expectCash(t *testing.T, c *Client, available, locked int64) {
	t.Helper()
	if a, l := c.Balance(t); a != available || l != locked {
		t.Fatalf("%s: cash %d available, %d locked; want %d and %d", c.Name, a, l, available, locked)
	}
}

func expectShares(t *testing.T, c *Client, key string, quantity, locked int64) {
	t.Helper()
	p, ok := c.Positions(t)[key]
	if quantity == 0 && !ok {
		return
	}
	if !ok || p.Quantity != quantity || p.LockedQuantity != locked {
		t.Fatalf("%s: position %s = %+v (held %v); want %d, %d locked", c.Name, key, p, ok, quantity, locked)
	}
}

func testSelfTrade(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "stp"), tg.NewAccount(t, "stp")
	own := a.Place(t, m.ID, "BUY", "NO", 50, 5) // a YES ask at 50
	b.Place(t, m.ID, "BUY", "NO", 50, 5)        // behind it
	o := a.Place(t, m.ID, "BUY", "YES", 50, 8)
	if o.FilledQuantity != 5 || len(o.Trades) != 1 || o.Status != "PARTIALLY_FILLED" {
		t.Fatalf("placement %+v: want 5 filled against b only", o)
	}
	var got apiserver.Order
	a.Expect(t, "GET", "/order?orderId="+own.ID.String(), nil, http.StatusOK, &got)
	if got.Status != "CANCELLED" {
		t.Fatalf("a's own resting order is %s, want CANCELLED by self-trade prevention", got.Status)
	}
	// a: 250 for the cancelled order released, 250 paid for 5 YES, 150 locked for 3 more.
	expectCash(t, a, Grant-250-150, 150)
	CheckInvariants(t, tg)
}

func testPriceImprovement(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "improve"), tg.NewAccount(t, "improve")
	a.Place(t, m.ID, "BUY", "NO", 45, 10) // a YES ask at 55
	o := b.Place(t, m.ID, "BUY", "YES", 70, 10)
	expectFill(t, o, "FILLED", 10, 55, 55)
	expectCash(t, b, Grant-550, 0)           // locked 700, paid 550, 150 surplus back
	b.Place(t, m.ID, "BUY", "YES", 40, 5)    // rests
	o = a.Place(t, m.ID, "BUY", "NO", 80, 5) // a YES ask at 20 meets the bid at 40: pays NO 60
	expectFill(t, o, "FILLED", 5, 60, 40)
	expectCash(t, a, Grant-450-300, 0)
	CheckInvariants(t, tg)
}
