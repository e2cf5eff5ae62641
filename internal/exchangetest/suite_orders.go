package exchangetest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/poll"
)

// SuiteMaxOpenOrders is the limit of open orders per account and market the suite's targets run
// with (pmx's default is 1,000): low enough to reach in a test.
const SuiteMaxOpenOrders = 20

// The contract of order entry: time in force, post-only, self-trade modes, cancel reasons, client
// order ids, the limit of open orders and the dead-man switch.

// placeWith places an order with extra fields and expects want; it returns the answer.
func placeWith(t *testing.T, c *Client, market uuid.UUID, side, outcome string, price, quantity int, extra map[string]any, want int) apiserver.PlacedOrder {
	t.Helper()
	body := OrderBody(market, side, outcome, price, quantity)
	for k, v := range extra {
		body[k] = v
	}
	var o apiserver.PlacedOrder
	c.Expect(t, "POST", "/order", body, want, &o)
	return o
}

func getOrder(t *testing.T, c *Client, id uuid.UUID) apiserver.Order {
	t.Helper()
	var o apiserver.Order
	c.Expect(t, "GET", "/order?orderId="+id.String(), nil, http.StatusOK, &o)
	return o
}

func expectReason(t *testing.T, what string, o apiserver.Order, status, reason string) {
	t.Helper()
	got := "null"
	if o.CancelReason != nil {
		got = *o.CancelReason
	}
	if o.Status != status || got != reason {
		t.Fatalf("%s: %s with cancelReason %s, want %s with %s", what, o.Status, got, status, reason)
	}
}

func testTimeInForce(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	maker, taker := tg.NewAccount(t, "tif"), tg.NewAccount(t, "tif")
	ask := maker.Place(t, m.ID, "BUY", "NO", 45, 5) // a YES ask at 55 for 5
	if ask.TimeInForce != "GTC" || ask.PostOnly || ask.ExpiresAt != nil || ask.ClientOrderID != nil || ask.CancelReason != nil {
		t.Fatalf("a plain order's new fields: %+v", ask.Order)
	}

	// FOK for more than the book holds: nothing changes, and it is recorded CANCELLED.
	before := state(t, taker)
	fok := placeWith(t, taker, m.ID, "BUY", "YES", 60, 8, map[string]any{"timeInForce": "FOK"}, http.StatusCreated)
	expectReason(t, "FOK for 8 against 5", fok.Order, "CANCELLED", "FOK")
	if fok.FilledQuantity != 0 || len(fok.Trades) != 0 || fok.TimeInForce != "FOK" {
		t.Fatalf("a killed FOK traded: %+v", fok)
	}
	if got := getOrder(t, maker, ask.ID); got.Status != "OPEN" {
		t.Fatalf("the resting order after a killed FOK: %s", got.Status)
	}
	if after := state(t, taker); after == before {
		t.Fatalf("a killed FOK is not among the account's orders")
	}
	expectCash(t, taker, Grant, 0)

	// IOC: fills what crosses, cancels the rest, at the resting price.
	ioc := placeWith(t, taker, m.ID, "BUY", "YES", 60, 8, map[string]any{"timeInForce": "IOC"}, http.StatusCreated)
	expectReason(t, "IOC for 8 against 5", ioc.Order, "PARTIALLY_FILLED_CANCELLED", "IOC")
	expectFill(t, ioc, "PARTIALLY_FILLED_CANCELLED", 5, 55, 55)
	expectCash(t, taker, Grant-275, 0)
	// IOC with nothing to meet: cancelled whole.
	none := placeWith(t, taker, m.ID, "BUY", "YES", 60, 3, map[string]any{"timeInForce": "IOC"}, http.StatusCreated)
	expectReason(t, "IOC into an empty book", none.Order, "CANCELLED", "IOC")

	// FOK that can fill, across two levels and with price improvement.
	maker.Place(t, m.ID, "BUY", "NO", 45, 2) // YES ask 55
	maker.Place(t, m.ID, "BUY", "NO", 42, 2) // YES ask 58
	full := placeWith(t, taker, m.ID, "BUY", "YES", 60, 4, map[string]any{"timeInForce": "FOK"}, http.StatusCreated)
	if full.Status != "FILLED" || full.FilledQuantity != 4 || len(full.Trades) != 2 || full.CancelReason != nil {
		t.Fatalf("a FOK the book can fill: %+v", full)
	}
	expectCash(t, taker, Grant-275-110-116, 0)

	// Post-only: refused if it would meet anything, own orders included; rests otherwise.
	maker.Place(t, m.ID, "BUY", "NO", 45, 1) // YES ask 55
	before = state(t, taker)
	taker.ExpectError(t, "POST", "/order", withFields(OrderBody(m.ID, "BUY", "YES", 55, 1), map[string]any{"postOnly": true}),
		http.StatusBadRequest, "post_only_would_cross")
	maker.ExpectError(t, "POST", "/order", withFields(OrderBody(m.ID, "BUY", "YES", 56, 1), map[string]any{"postOnly": true}),
		http.StatusBadRequest, "post_only_would_cross")
	if after := state(t, taker); after != before {
		t.Fatalf("a refused post-only order changed %s to %s", before, after)
	}
	post := placeWith(t, taker, m.ID, "BUY", "YES", 54, 1, map[string]any{"postOnly": true, "timeInForce": "GTC"}, http.StatusCreated)
	if post.Status != "OPEN" || !post.PostOnly {
		t.Fatalf("a post-only order that does not cross: %+v", post.Order)
	}
	for _, bad := range []struct {
		extra       map[string]any
		code, field string
	}{
		{map[string]any{"timeInForce": "IOC", "postOnly": true}, "invalid_value", "postOnly"},
		{map[string]any{"timeInForce": "DAY"}, "invalid_value", "timeInForce"},
		{map[string]any{"timeInForce": "GTD"}, "missing_field", "expiresAt"},
		{map[string]any{"expiresAt": "2099-01-01T00:00:00Z"}, "invalid_value", "expiresAt"},
		{map[string]any{"timeInForce": "GTD", "expiresAt": "2001-01-01T00:00:00Z"}, "invalid_value", "expiresAt"},
		{map[string]any{"selfTradePrevention": "DECREMENT"}, "invalid_value", "selfTradePrevention"},
		{map[string]any{"clientOrderId": "no spaces"}, "invalid_value", "clientOrderId"},
	} {
		e := taker.ExpectError(t, "POST", "/order", withFields(OrderBody(m.ID, "BUY", "YES", 10, 1), bad.extra), http.StatusBadRequest, bad.code)
		if e.Details.Field != bad.field {
			t.Errorf("%v: field %q, want %q", bad.extra, e.Details.Field, bad.field)
		}
	}
	CheckInvariants(t, tg)
}

// withFields adds fields to a body.
func withFields(body map[string]any, extra map[string]any) map[string]any {
	for k, v := range extra {
		body[k] = v
	}
	return body
}

func testSelfTradeModes(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a := tg.NewAccount(t, "stpmode")
	own := a.Place(t, m.ID, "BUY", "NO", 50, 5) // a YES ask at 50
	// CANCEL_INCOMING: the arriving order goes, the resting one stays.
	in := placeWith(t, a, m.ID, "BUY", "YES", 50, 3, map[string]any{"selfTradePrevention": "CANCEL_INCOMING"}, http.StatusCreated)
	expectReason(t, "incoming order under CANCEL_INCOMING", in.Order, "CANCELLED", "SELF_TRADE")
	if got := getOrder(t, a, own.ID); got.Status != "OPEN" {
		t.Fatalf("the resting order under CANCEL_INCOMING: %s", got.Status)
	}
	expectCash(t, a, Grant-250, 250)
	// CANCEL_RESTING (the default): the resting one goes, with its reason.
	rest := placeWith(t, a, m.ID, "BUY", "YES", 50, 3, map[string]any{"selfTradePrevention": "CANCEL_RESTING"}, http.StatusCreated)
	if rest.Status != "OPEN" {
		t.Fatalf("the incoming order under CANCEL_RESTING: %s", rest.Status)
	}
	expectReason(t, "resting order under CANCEL_RESTING", getOrder(t, a, own.ID), "CANCELLED", "SELF_TRADE")
	// A cancel by its owner, and by the market's closing, say so.
	var cancelled apiserver.Order
	a.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": rest.ID}, http.StatusOK, &cancelled)
	expectReason(t, "cancelled by its owner", cancelled, "CANCELLED", "USER")
	open := a.Place(t, m.ID, "BUY", "YES", 20, 1)
	tg.Markets.Close(t, m.ID)
	expectReason(t, "cancelled by the market's closing", getOrder(t, a, open.ID), "CANCELLED", "MARKET_CLOSED")
	CheckInvariants(t, tg)
}

func testGoodTillDate(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "gtd"), tg.NewAccount(t, "gtd")
	expires := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	gtdFields := map[string]any{"timeInForce": "GTD", "expiresAt": expires.Format(time.RFC3339Nano), "clientOrderId": "gtd-1"}
	gtd := placeWith(t, a, m.ID, "BUY", "YES", 40, 2, gtdFields, http.StatusCreated)
	if gtd.Status != "OPEN" || gtd.TimeInForce != "GTD" || gtd.ExpiresAt == nil || !gtd.ExpiresAt.Equal(expires) {
		t.Fatalf("a GTD order: %+v", gtd.Order)
	}
	later := placeWith(t, a, m.ID, "BUY", "YES", 39, 1, map[string]any{"timeInForce": "GTD", "expiresAt": time.Now().Add(time.Hour).Format(time.RFC3339)}, http.StatusCreated)
	// Before its time it trades like any order.
	expectFill(t, b.Place(t, m.ID, "BUY", "NO", 60, 1), "FILLED", 1, 60, 40)
	var got apiserver.Order
	if err := poll.Until(context.Background(), 10*time.Second, func(context.Context) (bool, error) {
		got = getOrder(t, a, gtd.ID)
		return got.Status != "OPEN" && got.Status != "PARTIALLY_FILLED", nil
	}); err != nil {
		t.Fatalf("the GTD order is still %s past its time: %v", got.Status, err)
	}
	expectReason(t, "a GTD order past its time", got, "PARTIALLY_FILLED_CANCELLED", "EXPIRED")
	if late := got.UpdatedAt.Sub(expires); late < 0 || late > 2*time.Second {
		t.Errorf("the GTD order was cancelled %v after its time", late)
	}
	if g := getOrder(t, a, later.ID); g.Status != "OPEN" {
		t.Errorf("a GTD order an hour away: %s", g.Status)
	}
	// A retry of the placement after its expiry — a client that timed out and tries again — is
	// still a replay, answered with the order as it stands, not refused for an expiry in the past.
	body := withFields(OrderBody(m.ID, "BUY", "YES", 40, 2), gtdFields)
	resp, raw := a.DoResponse(t, "POST", "/order", body)
	var replayed apiserver.Order
	if err := json.Unmarshal(raw, &replayed); err != nil || resp.StatusCode != http.StatusOK || replayed.ID != gtd.ID {
		t.Errorf("a replay of a GTD placement past its expiry: %d %s, want 200 with order %s", resp.StatusCode, raw, gtd.ID)
	}
	var batch struct{ Results []struct{ Status int } }
	a.Expect(t, "POST", "/orders/batch", map[string]any{"orders": []any{body}}, http.StatusCreated, &batch)
	if len(batch.Results) != 1 || batch.Results[0].Status != http.StatusOK {
		t.Errorf("a replay in a batch of a GTD placement past its expiry: %+v, want status 200", batch.Results)
	}
	// A new placement with an expiry in the past is still refused.
	e := a.ExpectError(t, "POST", "/order", withFields(OrderBody(m.ID, "BUY", "YES", 40, 2), map[string]any{"timeInForce": "GTD",
		"expiresAt": expires.Format(time.RFC3339Nano), "clientOrderId": "gtd-2"}), http.StatusBadRequest, "invalid_value")
	if e.Details.Field != "expiresAt" {
		t.Errorf("a placement with a past expiry names %q", e.Details.Field)
	}
	CheckInvariants(t, tg)
}

func testClientOrderIDs(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "coid"), tg.NewAccount(t, "coid")
	body := func(price int) map[string]any {
		return withFields(OrderBody(m.ID, "BUY", "YES", price, 2), map[string]any{"clientOrderId": "quote:1.a_b-c"})
	}
	placed := placeWith(t, a, m.ID, "BUY", "YES", 30, 2, map[string]any{"clientOrderId": "quote:1.a_b-c"}, http.StatusCreated)
	if placed.ClientOrderID == nil || *placed.ClientOrderID != "quote:1.a_b-c" {
		t.Fatalf("the placed order's clientOrderId: %v", placed.ClientOrderID)
	}
	before := state(t, a)
	// The same placement again: the order as it stands, and nothing placed.
	resp, raw := a.DoResponse(t, "POST", "/order", body(30))
	var replayed apiserver.Order
	if err := json.Unmarshal(raw, &replayed); err != nil || resp.StatusCode != http.StatusOK ||
		resp.Header.Get("Idempotent-Replayed") != "true" || replayed.ID != placed.ID || replayed.Status != "OPEN" {
		t.Fatalf("a repeated placement: %d %q %s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), raw)
	}
	if after := state(t, a); after != before {
		t.Fatalf("a replay changed the account: %s → %s", before, after)
	}
	// The same id with another price: refused, nothing changed.
	a.ExpectError(t, "POST", "/order", body(31), http.StatusConflict, "client_order_id_reused")
	// Another account may use the same id.
	placeWith(t, b, m.ID, "BUY", "YES", 30, 2, map[string]any{"clientOrderId": "quote:1.a_b-c"}, http.StatusCreated)
	// Read and cancel by client order id; a replay then shows the order as it now stands.
	var got apiserver.Order
	a.Expect(t, "GET", "/order?clientOrderId=quote:1.a_b-c", nil, http.StatusOK, &got)
	if got.ID != placed.ID {
		t.Fatalf("GET /order by clientOrderId: %s, want %s", got.ID, placed.ID)
	}
	a.ExpectError(t, "GET", "/order?clientOrderId=nobody", nil, http.StatusNotFound, "order_not_found")
	a.ExpectError(t, "GET", "/order?clientOrderId=a%20b", nil, http.StatusBadRequest, "invalid_value")
	a.ExpectError(t, "GET", "/order?clientOrderId=x&orderId="+placed.ID.String(), nil, http.StatusBadRequest, "invalid_value")
	a.Expect(t, "POST", "/cancel-order", map[string]any{"clientOrderId": "quote:1.a_b-c"}, http.StatusOK, &got)
	expectReason(t, "cancelled by client order id", got, "CANCELLED", "USER")
	a.ExpectError(t, "POST", "/cancel-order", map[string]any{"clientOrderId": "quote:1.a_b-c"}, http.StatusBadRequest, "order_not_open")
	a.ExpectError(t, "POST", "/cancel-order", map[string]any{"clientOrderId": "nobody"}, http.StatusNotFound, "order_not_found")
	resp, raw = a.DoResponse(t, "POST", "/order", body(30))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &got) != nil || got.Status != "CANCELLED" {
		t.Fatalf("a replay of a cancelled order: %d %s", resp.StatusCode, raw)
	}

	// Retries racing each other: one order, every answer that order.
	const racers = 8
	ids := make([]string, racers)
	statuses := make([]int, racers)
	var wg sync.WaitGroup
	raceBody, _ := json.Marshal(withFields(OrderBody(m.ID, "BUY", "YES", 25, 1), map[string]any{"clientOrderId": "race"}))
	for i := range racers {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", tg.URL+"/api/v1/order", bytes.NewReader(raceBody))
			req.Header.Set("Authorization", "Bearer "+a.Key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := tg.HTTP.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			var o apiserver.Order
			if json.NewDecoder(resp.Body).Decode(&o) == nil {
				statuses[i], ids[i] = resp.StatusCode, o.ID.String()
			}
		})
	}
	wg.Wait()
	created := 0
	for i := range racers {
		if statuses[i] == http.StatusCreated {
			created++
		}
		if (statuses[i] != http.StatusCreated && statuses[i] != http.StatusOK) || ids[i] != ids[0] {
			t.Errorf("racing placements of one client order id: %v %v", statuses, ids)
			break
		}
	}
	if created != 1 {
		t.Errorf("racing placements of one client order id made %d orders: %v", created, statuses)
	}
	CheckInvariants(t, tg)
}

func testOpenOrderLimit(t *testing.T, tg *Target) {
	m, other := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	a := tg.NewAccount(t, "limit")
	for i := range SuiteMaxOpenOrders {
		a.Place(t, m.ID, "BUY", "YES", 1+i%10, 1)
	}
	before := state(t, a)
	e := a.ExpectError(t, "POST", "/order", OrderBody(m.ID, "BUY", "YES", 5, 1), http.StatusBadRequest, "too_many_open_orders")
	if e.Details.Field != "marketId" {
		t.Errorf("too_many_open_orders names %q", e.Details.Field)
	}
	if after := state(t, a); after != before {
		t.Fatalf("a refused placement changed %s to %s", before, after)
	}
	// Orders that never rest are not limited, nor are other markets; a cancel makes room.
	placeWith(t, a, m.ID, "BUY", "YES", 5, 1, map[string]any{"timeInForce": "IOC"}, http.StatusCreated)
	a.Place(t, other.ID, "BUY", "YES", 5, 1)
	var list struct{ Orders []apiserver.Order }
	a.Expect(t, "GET", "/orders?marketId="+m.ID.String()+"&status=OPEN&limit=1", nil, http.StatusOK, &list)
	a.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": list.Orders[0].ID}, http.StatusOK, nil)
	a.Place(t, m.ID, "BUY", "YES", 5, 1)
	CheckInvariants(t, tg)
}

func testHeartbeat(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "heartbeat"), tg.NewAccount(t, "heartbeat")
	var hb apiserver.Heartbeat
	start := time.Now()
	a.Expect(t, "POST", "/heartbeat", map[string]any{"timeoutSeconds": 300}, http.StatusOK, &hb)
	if !hb.Armed || hb.Deadline == nil || hb.Deadline.Before(start.Add(299*time.Second)) || hb.Deadline.After(time.Now().Add(301*time.Second)) {
		t.Fatalf("armed for 300 s: %+v", hb)
	}
	a.Expect(t, "POST", "/heartbeat", map[string]any{"timeoutSeconds": 0}, http.StatusOK, &hb)
	if hb.Armed || hb.Deadline != nil {
		t.Fatalf("disarmed: %+v", hb)
	}
	for _, bad := range []struct {
		body any
		code string
	}{
		{map[string]any{}, "missing_field"},
		{map[string]any{"timeoutSeconds": 4}, "out_of_range"},
		{map[string]any{"timeoutSeconds": 301}, "out_of_range"},
		{map[string]any{"timeoutSeconds": -1}, "out_of_range"},
		{map[string]any{"timeoutSeconds": 5.5}, "not_an_integer"},
		{map[string]any{"timeoutSeconds": "5"}, "invalid_type"},
		{`{"timeoutSeconds":5,"timeoutSeconds":6}`, "duplicate_key"},
	} {
		a.ExpectError(t, "POST", "/heartbeat", bad.body, http.StatusBadRequest, bad.code)
	}

	// Armed and not renewed: the account's open orders are cancelled within a second of the
	// deadline; another account's are not.
	bid := a.Place(t, m.ID, "BUY", "YES", 30, 2)
	theirs := b.Place(t, m.ID, "BUY", "YES", 29, 2)
	a.Expect(t, "POST", "/heartbeat", map[string]any{"timeoutSeconds": 5}, http.StatusOK, &hb)
	var got apiserver.Order
	if err := poll.Until(context.Background(), 15*time.Second, func(context.Context) (bool, error) {
		got = getOrder(t, a, bid.ID)
		return got.Status != "OPEN", nil
	}); err != nil {
		t.Fatalf("the dead-man switch did not fire: the order is %s: %v", got.Status, err)
	}
	expectReason(t, "an order when the dead-man switch fired", got, "CANCELLED", "HEARTBEAT")
	if late := got.UpdatedAt.Sub(*hb.Deadline); late < 0 || late > time.Second {
		t.Errorf("the order was cancelled %v after the deadline; the contract says within a second", late)
	}
	if g := getOrder(t, b, theirs.ID); g.Status != "OPEN" {
		t.Errorf("another account's order: %s", g.Status)
	}
	expectCash(t, a, Grant, 0)
	CheckInvariants(t, tg)
}

func testAmend(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b, c := tg.NewAccount(t, "amend"), tg.NewAccount(t, "amend"), tg.NewAccount(t, "amend")
	amend := func(who *Client, fields map[string]any, want int) apiserver.PlacedOrder {
		t.Helper()
		var o apiserver.PlacedOrder
		who.Expect(t, "POST", "/order/amend", fields, want, &o)
		return o
	}
	first := placeWith(t, a, m.ID, "BUY", "YES", 40, 5, map[string]any{"clientOrderId": "amend-me"}, http.StatusCreated)
	second := b.Place(t, m.ID, "BUY", "YES", 40, 2)

	// Less at the same price keeps a's place: the next seller meets a first.
	got := amend(a, map[string]any{"orderId": first.ID, "quantity": 3}, http.StatusOK)
	if got.ID != first.ID || got.Quantity != 3 || got.Price != 40 || got.Status != "OPEN" || len(got.Trades) != 0 {
		t.Fatalf("amended to 3 remaining: %+v", got)
	}
	expectCash(t, a, Grant-120, 120)
	expectFill(t, c.Place(t, m.ID, "BUY", "NO", 60, 1), "FILLED", 1, 60, 40)
	if o := getOrder(t, a, first.ID); o.FilledQuantity != 1 {
		t.Fatalf("a kept its place, yet filled %d", o.FilledQuantity)
	}
	// More sends it to the back: the next seller meets b.
	got = amend(a, map[string]any{"clientOrderId": "amend-me", "quantity": 4}, http.StatusOK)
	if got.Quantity != 5 || got.FilledQuantity != 1 {
		t.Fatalf("amended to 4 remaining after 1 filled: quantity %d, filled %d; want 5 and 1", got.Quantity, got.FilledQuantity)
	}
	expectCash(t, a, Grant-40-160, 160)
	CheckInvariants(t, tg) // the books rebuilt from Postgres keep a behind b, as in memory
	c.Place(t, m.ID, "BUY", "NO", 60, 1)
	if o := getOrder(t, b, second.ID); o.FilledQuantity != 1 {
		t.Fatalf("a went to the back, yet b filled %d", o.FilledQuantity)
	}
	// A new price that crosses trades at once, at the resting price.
	c.Place(t, m.ID, "BUY", "NO", 45, 2) // a YES ask at 55
	got = amend(a, map[string]any{"orderId": first.ID, "price": 60}, http.StatusOK)
	if got.Price != 60 || got.FilledQuantity != 3 || got.Status != "PARTIALLY_FILLED" || len(got.Trades) != 1 ||
		got.Trades[0].Price != 55 || got.Trades[0].Quantity != 2 {
		t.Fatalf("amended across the book: %+v", got)
	}
	expectCash(t, a, Grant-40-110-120, 120) // 2 left at 60
	// Refusals change nothing.
	before := state(t, a)
	a.ExpectError(t, "POST", "/order/amend", map[string]any{"orderId": first.ID, "quantity": 1_000_000, "price": 99}, http.StatusBadRequest, "insufficient_funds")
	a.ExpectError(t, "POST", "/order/amend", map[string]any{"orderId": first.ID}, http.StatusBadRequest, "missing_field")
	a.ExpectError(t, "POST", "/order/amend", map[string]any{"orderId": first.ID, "price": 100}, http.StatusBadRequest, "out_of_range")
	a.ExpectError(t, "POST", "/order/amend", map[string]any{"orderId": first.ID, "quantity": 0}, http.StatusBadRequest, "out_of_range")
	a.ExpectError(t, "POST", "/order/amend", map[string]any{"orderId": uuid.New(), "price": 41}, http.StatusNotFound, "order_not_found")
	b.ExpectError(t, "POST", "/order/amend", map[string]any{"orderId": first.ID, "price": 41}, http.StatusForbidden, "not_your_order")
	if after := state(t, a); after != before {
		t.Fatalf("a refused amend changed %s to %s", before, after)
	}
	a.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": first.ID}, http.StatusOK, nil)
	a.ExpectError(t, "POST", "/order/amend", map[string]any{"orderId": first.ID, "price": 41}, http.StatusBadRequest, "order_not_open")
	post := placeWith(t, a, m.ID, "BUY", "YES", 30, 1, map[string]any{"postOnly": true}, http.StatusCreated)
	c.Place(t, m.ID, "BUY", "NO", 40, 1) // a YES ask at 60, above every bid
	a.ExpectError(t, "POST", "/order/amend", map[string]any{"orderId": post.ID, "price": 61}, http.StatusBadRequest, "post_only_would_cross")
	CheckInvariants(t, tg)
}

func testBatchPlace(t *testing.T, tg *Target) {
	m, other := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	a := tg.NewAccount(t, "batch")
	orders := []any{
		withFields(OrderBody(m.ID, "BUY", "YES", 30, 1), map[string]any{"clientOrderId": "b-1"}),
		OrderBody(m.ID, "BUY", "YES", 0, 1),
		5,
		withFields(OrderBody(m.ID, "BUY", "YES", 31, 1), map[string]any{"clientOrderId": "b-1"}),
		withFields(OrderBody(m.ID, "BUY", "YES", 30, 1), map[string]any{"clientOrderId": "b-1"}),
		OrderBody(uuid.New(), "BUY", "YES", 30, 1),
		OrderBody(other.ID, "BUY", "NO", 60, 2), // a YES ask at 40 in the other market
		withFields(OrderBody(other.ID, "BUY", "YES", 40, 1), map[string]any{"selfTradePrevention": "CANCEL_INCOMING"}),
		// A refused placement leaves its client order id free for the next one, in the same batch.
		withFields(OrderBody(m.ID, "BUY", "YES", 99, 1_000_000), map[string]any{"clientOrderId": "b-2"}),
		withFields(OrderBody(m.ID, "BUY", "YES", 20, 1), map[string]any{"clientOrderId": "b-2"}),
	}
	var answer struct {
		Results []struct {
			Status  int
			Order   json.RawMessage
			Error   string
			Details struct{ Code, Field string }
		}
	}
	a.Expect(t, "POST", "/orders/batch", map[string]any{"orders": orders}, http.StatusCreated, &answer)
	want := []struct {
		status int
		code   string
	}{{201, ""}, {400, "out_of_range"}, {400, "invalid_type"}, {409, "client_order_id_reused"}, {200, ""}, {400, "market_not_found"},
		{201, ""}, {201, ""}, {400, "insufficient_funds"}, {201, ""}}
	if len(answer.Results) != len(want) {
		t.Fatalf("%d results for %d placements", len(answer.Results), len(want))
	}
	var first, replayed, last apiserver.PlacedOrder
	for i, w := range want {
		r := answer.Results[i]
		if r.Status != w.status || r.Details.Code != w.code || (w.code != "") != (r.Error != "") || (w.code == "") != (len(r.Order) > 0) {
			t.Errorf("result %d: %d %q %q; want %d %q", i, r.Status, r.Details.Code, r.Error, w.status, w.code)
		}
	}
	_ = json.Unmarshal(answer.Results[0].Order, &first)
	_ = json.Unmarshal(answer.Results[4].Order, &replayed)
	_ = json.Unmarshal(answer.Results[7].Order, &last)
	if first.ID == uuid.Nil || replayed.ID != first.ID {
		t.Errorf("the replay in the batch answered %s, the placement %s", replayed.ID, first.ID)
	}
	// Placements to one market run in request order: the bid met the ask placed just before it.
	expectReason(t, "the second placement of a market, meeting the first", last.Order, "CANCELLED", "SELF_TRADE")
	for _, bad := range []struct {
		body any
		code string
	}{
		{map[string]any{"orders": []any{}}, "out_of_range"},
		{map[string]any{"orders": make([]any, 21)}, "out_of_range"},
		{map[string]any{"orders": map[string]any{}}, "invalid_type"},
		{map[string]any{}, "missing_field"},
		{`{"orders":[{"price":1,"price":2}]}`, "duplicate_key"},
	} {
		a.ExpectError(t, "POST", "/orders/batch", bad.body, http.StatusBadRequest, bad.code)
	}
	CheckInvariants(t, tg)
}

func testBatchCancel(t *testing.T, tg *Target) {
	m, other := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "bcancel"), tg.NewAccount(t, "bcancel")
	yes10 := a.Place(t, m.ID, "BUY", "YES", 10, 1)
	yes11 := a.Place(t, m.ID, "BUY", "YES", 11, 1)
	no20 := a.Place(t, m.ID, "BUY", "NO", 20, 1)
	elsewhere := a.Place(t, other.ID, "BUY", "YES", 10, 1)
	theirs := b.Place(t, m.ID, "BUY", "YES", 12, 1)
	type answer struct {
		Cancelled []apiserver.Order
		Errors    []struct {
			OrderID uuid.UUID
			Error   string
			Details struct{ Code string }
		}
	}
	var got answer
	nobody := uuid.New()
	a.Expect(t, "POST", "/orders/cancel", map[string]any{"orderIds": []uuid.UUID{yes10.ID, nobody, theirs.ID}}, http.StatusOK, &got)
	if len(got.Cancelled) != 1 || got.Cancelled[0].ID != yes10.ID || len(got.Errors) != 2 {
		t.Fatalf("cancel by ids: %+v", got)
	}
	codes := map[uuid.UUID]string{}
	for _, e := range got.Errors {
		codes[e.OrderID] = e.Details.Code
	}
	if codes[nobody] != "order_not_found" || codes[theirs.ID] != "not_your_order" {
		t.Fatalf("cancel by ids, errors: %v", codes)
	}
	got = answer{}
	a.Expect(t, "POST", "/orders/cancel", map[string]any{"marketId": m.ID, "side": "BUY", "outcome": "NO"}, http.StatusOK, &got)
	if len(got.Cancelled) != 1 || got.Cancelled[0].ID != no20.ID || len(got.Errors) != 0 {
		t.Fatalf("cancel BUY NO in a market: %+v", got)
	}
	got = answer{}
	a.Expect(t, "POST", "/orders/cancel", map[string]any{"marketId": m.ID}, http.StatusOK, &got)
	if len(got.Cancelled) != 1 || got.Cancelled[0].ID != yes11.ID {
		t.Fatalf("cancel a market: %+v", got)
	}
	expectReason(t, "cancelled in a batch", got.Cancelled[0], "CANCELLED", "USER")
	if o := getOrder(t, a, elsewhere.ID); o.Status != "OPEN" {
		t.Fatalf("an order in another market: %s", o.Status)
	}
	if o := getOrder(t, b, theirs.ID); o.Status != "OPEN" {
		t.Fatalf("another account's order: %s", o.Status)
	}
	ids := make([]uuid.UUID, 101)
	for i := range ids {
		ids[i] = uuid.New()
	}
	for _, bad := range []struct {
		body any
		code string
	}{
		{map[string]any{}, "missing_field"},
		{map[string]any{"orderIds": []uuid.UUID{yes10.ID}, "marketId": m.ID}, "invalid_value"},
		{map[string]any{"orderIds": []string{"x"}}, "invalid_uuid"},
		{map[string]any{"orderIds": ids}, "out_of_range"},
		{map[string]any{"orderIds": []uuid.UUID{}}, "out_of_range"},
		{map[string]any{"marketId": m.ID, "side": "buy"}, "invalid_value"},
	} {
		a.ExpectError(t, "POST", "/orders/cancel", bad.body, http.StatusBadRequest, bad.code)
	}
	CheckInvariants(t, tg)
}

func testSettlements(t *testing.T, tg *Target) {
	resolved, canceled := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	a, b, c := tg.NewAccount(t, "settle"), tg.NewAccount(t, "settle"), tg.NewAccount(t, "settle")
	a.Place(t, resolved.ID, "BUY", "YES", 60, 3)
	b.Place(t, resolved.ID, "BUY", "NO", 40, 3) // mints 3 pairs: a holds 3 YES, b 3 NO
	c.Place(t, resolved.ID, "BUY", "YES", 50, 1)
	a.Place(t, resolved.ID, "BUY", "NO", 50, 1) // a also holds 1 NO
	tg.Markets.Resolve(t, resolved.ID, "YES")
	a.Place(t, canceled.ID, "BUY", "YES", 30, 2)
	b.Place(t, canceled.ID, "BUY", "NO", 70, 2)
	tg.Markets.Cancel(t, canceled.ID)

	type page struct {
		Settlements []apiserver.Settlement
		NextCursor  *string
	}
	var all page
	a.Expect(t, "GET", "/settlements", nil, http.StatusOK, &all)
	want := []struct {
		market      uuid.UUID
		status, out string
		qty, payout int64
	}{{canceled.ID, "CANCELED", "YES", 2, 100}, {resolved.ID, "RESOLVED", "YES", 3, 300}, {resolved.ID, "RESOLVED", "NO", 1, 0}}
	if len(all.Settlements) != len(want) || all.NextCursor != nil {
		t.Fatalf("a's settlements: %+v", all)
	}
	for i, w := range want {
		g := all.Settlements[i]
		if g.MarketID != w.market || g.MarketStatus != w.status || g.Outcome != w.out || g.Quantity != w.qty || g.Payout != w.payout {
			t.Errorf("settlement %d: %+v, want %+v", i, g, w)
		}
	}
	// One at a time, by cursor: the same rows, in the same order.
	cursor := ""
	for i := range want {
		var p page
		a.Expect(t, "GET", "/settlements?limit=1"+cursor, nil, http.StatusOK, &p)
		if len(p.Settlements) != 1 || p.Settlements[0] != all.Settlements[i] || p.NextCursor == nil {
			t.Fatalf("page %d: %+v", i, p)
		}
		cursor = "&cursor=" + *p.NextCursor
	}
	var last page
	a.Expect(t, "GET", "/settlements?limit=1"+cursor, nil, http.StatusOK, &last)
	if len(last.Settlements) != 0 || last.NextCursor != nil {
		t.Fatalf("past the last page: %+v", last)
	}
	var none page
	tg.NewAccount(t, "settle").Expect(t, "GET", "/settlements", nil, http.StatusOK, &none)
	if len(none.Settlements) != 0 || none.NextCursor != nil {
		t.Fatalf("an account that held nothing: %+v", none)
	}
	var orders struct{ NextCursor *string }
	a.Expect(t, "GET", "/orders?limit=1", nil, http.StatusOK, &orders)
	a.ExpectError(t, "GET", "/settlements?cursor="+*orders.NextCursor, nil, http.StatusBadRequest, "invalid_cursor")
	a.ExpectError(t, "GET", "/settlements?cursor=x", nil, http.StatusBadRequest, "invalid_cursor")
	a.ExpectError(t, "GET", "/settlements?limit=0", nil, http.StatusBadRequest, "out_of_range")
	CheckInvariants(t, tg)
}
