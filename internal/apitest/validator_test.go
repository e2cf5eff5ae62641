package apitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

const (
	base     = "http://127.0.0.1:12345/api/v1"
	marketID = "6f1c2a8e-3b4d-4c5e-9f60-718293a4b5c6"
	orderID  = "0190f5b2-7c1e-7a3b-8f00-1234567890ab"
	tradeID  = "0190f5b2-7c1e-7a3b-8f00-1234567890ac"
	otherID  = "11111111-2222-4333-8444-555555555555"
	now      = "2030-05-01T12:00:00.123456Z"
)

// Fixtures: valid bodies, as fresh maps so that cases may alter them.

func market() map[string]any {
	return map[string]any{
		"id": marketID, "url": "https://example.com/rain", "question": "Will it rain?",
		"description": nil, "category": "weather", "status": "OPEN",
		"closesAt": "2030-06-01T00:00:00Z", "resolvesAt": nil, "resolved": false, "outcome": nil,
		"labelA": "Rain", "labelB": "No rain", "createdAt": now, "updatedAt": now,
		"fees": map[string]any{"takerBps": 700, "makerBps": -175},
	}
}

func resolvedMarket() map[string]any {
	m := market()
	m["status"], m["resolved"], m["outcome"], m["url"] = "RESOLVED", true, "YES", nil
	return m
}

func level(price, quantity, total int) map[string]any {
	return map[string]any{"price": price, "quantity": quantity, "total": total}
}

func book() map[string]any {
	return map[string]any{
		"orderBookYes": map[string]any{
			"bids":           []any{level(40, 10, 10), level(38, 5, 15)},
			"asks":           []any{level(45, 7, 7)},
			"lastTradePrice": 42,
		},
		"orderBookNo": map[string]any{
			"bids":           []any{level(55, 7, 7)},
			"asks":           []any{level(60, 10, 10), level(62, 5, 15)},
			"lastTradePrice": 58,
		},
		"seq": 1234,
	}
}

func emptyBook() map[string]any {
	side := func() map[string]any { return map[string]any{"bids": []any{}, "asks": []any{}, "lastTradePrice": nil} }
	return map[string]any{"orderBookYes": side(), "orderBookNo": side(), "seq": 0}
}

func trade() map[string]any {
	return map[string]any{
		"id": tradeID, "marketId": marketID, "outcome": "NO", "side": "BUY", "price": 58,
		"quantity": 3, "yesPrice": 42, "createdAt": now,
	}
}

func order() map[string]any {
	return map[string]any{
		"id": orderID, "marketId": marketID, "side": "BUY", "outcome": "NO", "price": 60,
		"quantity": 10, "filledQuantity": 3, "status": "PARTIALLY_FILLED",
		"createdAt": now, "updatedAt": now, "timeInForce": "GTC", "expiresAt": nil, "postOnly": false,
		"clientOrderId": nil, "cancelReason": nil,
	}
}

func placed() map[string]any {
	o := order()
	o["trades"] = []any{set(trade(), "fee", 17)} // the taker's fee rides on each of its trades
	return o
}

func cancelled() map[string]any {
	o := order()
	o["status"] = "PARTIALLY_FILLED_CANCELLED"
	o["cancelReason"] = "USER"
	return o
}

func position() map[string]any {
	return map[string]any{
		"id": otherID, "marketId": marketID, "marketQuestion": "Will it rain?", "marketStatus": "OPEN",
		"outcome": "YES", "quantity": 10, "lockedQuantity": 4, "createdAt": now, "updatedAt": now,
	}
}

func account() map[string]any {
	return map[string]any{"id": otherID, "name": "bot-1", "available": 999_700, "locked": 300, "createdAt": now}
}

func apiError(code string) map[string]any {
	return map[string]any{"error": "something is wrong", "details": map[string]any{"code": code}}
}

func fieldError(code, field string) map[string]any {
	return map[string]any{"error": "something is wrong", "details": map[string]any{"code": code, "field": field}}
}

// set returns m after m[k] = v; del returns m after deleting k.
func set(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }
func del(m map[string]any, k string) map[string]any        { delete(m, k); return m }

var (
	jsonHeader = http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	authHeader = http.Header{"Content-Type": {"application/json"}, "Www-Authenticate": {`Bearer realm="pmx"`}}
)

type exchange struct {
	name   string
	method string
	target string // relative to base, or an absolute URL
	status int
	header http.Header // jsonHeader when nil
	body   any         // marshalled to JSON unless it is a string (sent as is)
}

func (e exchange) request() *http.Request {
	target := e.target
	if !strings.HasPrefix(target, "http") {
		target = base + target
	}
	return httptest.NewRequest(e.method, target, nil)
}

func (e exchange) parts(t *testing.T) (http.Header, []byte) {
	h := e.header
	if h == nil {
		h = jsonHeader
	}
	if s, ok := e.body.(string); ok {
		return h, []byte(s)
	}
	b, err := json.Marshal(e.body)
	if err != nil {
		t.Fatal(err)
	}
	return h, b
}

func TestValidResponses(t *testing.T) {
	v := NewValidator(t)
	q := "?marketId=" + marketID
	cases := []exchange{
		{"markets", "GET", "/markets", 200, nil, map[string]any{"markets": []any{market(), resolvedMarket()}}},
		{"markets filtered empty", "GET", "/markets?status=CLOSED", 200, nil, map[string]any{"markets": []any{}}},
		{"markets bad status", "GET", "/markets?status=ACTIVE", 400, nil, fieldError("invalid_parameter", "status")},
		{"market 201", "GET", "/market" + q, 201, nil, market()},
		{"market resolved", "GET", "/market" + q, 201, nil, resolvedMarket()},
		{"market extra property", "GET", "/market" + q, 201, nil, set(market(), "volume", 1234)},
		{"market uppercase id in request", "GET", "/market?marketId=" + strings.ToUpper(marketID), 201, nil, market()},
		{"market malformed id", "GET", "/market?marketId=nope", 400, nil, fieldError("invalid_parameter", "marketId")},
		{"market missing id", "GET", "/market", 400, nil, fieldError("invalid_parameter", "marketId")},
		{"market unknown", "GET", "/market" + q, 404, nil, apiError("market_not_found")},
		{"book", "GET", "/market/order-book" + q, 200, nil, book()},
		{"book empty", "GET", "/market/order-book" + q, 200, nil, emptyBook()},
		{"book unknown market", "GET", "/market/order-book" + q, 400, nil, apiError("market_not_found")},
		{"trades", "GET", "/market/trades" + q + "&limit=500", 200, nil, []any{trade(), set(trade(), "outcome", "YES")}},
		{"trades none", "GET", "/market/trades" + q, 200, nil, []any{}},
		{"trades bad limit", "GET", "/market/trades" + q + "&limit=501", 400, nil, fieldError("invalid_parameter", "limit")},
		{"place", "POST", "/order", 201, nil, placed()},
		{"place resting", "POST", "/order", 201, nil, set(set(placed(), "trades", []any{}), "filledQuantity", 0)},
		{"place rejected", "POST", "/order", 400, nil, apiError("insufficient_funds")},
		{"positions", "GET", "/positions", 200, nil, map[string]any{"positions": []any{position()}}},
		{"positions no account", "GET", "/positions", 404, nil, apiError("account_not_found")},
		{"cancel", "POST", "/cancel-order", 200, nil, set(cancelled(), "status", "CANCELLED")},
		{"cancel not open", "POST", "/cancel-order", 400, nil, apiError("order_not_open")},
		{"cancel foreign", "POST", "/cancel-order", 403, nil, apiError("forbidden")},
		{"cancel unknown", "POST", "/cancel-order", 404, nil, apiError("order_not_found")},
		{"cancel everything", "POST", "/cancel-everything", 200, nil, []any{cancelled(), set(cancelled(), "status", "CANCELLED")}},
		{"cancel everything none", "POST", "/cancel-everything", 200, nil, []any{}},
		{"account", "GET", "/account", 200, nil, account()},
		{"orders", "GET", "/orders?status=OPEN&limit=1&marketId=" + marketID, 200, nil, map[string]any{"orders": []any{order()}, "nextCursor": "abc"}},
		{"orders last page", "GET", "/orders?cursor=abc", 200, nil, map[string]any{"orders": []any{}, "nextCursor": nil}},
		{"orders bad status", "GET", "/orders?status=DONE", 400, nil, apiError("invalid_parameter")},
		{"order", "GET", "/order?orderId=" + orderID, 200, nil, set(order(), "status", "FILLED")},
		{"order foreign", "GET", "/order?orderId=" + orderID, 403, nil, apiError("forbidden")},
		{"order unknown", "GET", "/order?orderId=" + orderID, 404, nil, apiError("order_not_found")},
		{"error without details", "GET", "/order?orderId=x", 400, nil, map[string]any{"error": "bad id"}},
		{"401 markets", "GET", "/markets", 401, authHeader, apiError("unauthorized")},
		{"401 with invalid request", "GET", "/market?marketId=x", 401, authHeader, apiError("unauthorized")},
		{"401 cancel everything", "POST", "/cancel-everything", 401, authHeader, apiError("unauthorized")},
		{"server-side request", "GET", "/api/v1/account", 200, nil, account()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := c.request()
			if c.name == "server-side request" {
				req = httptest.NewRequest(c.method, c.target, nil) // URL holds only the path
			}
			h, b := c.parts(t)
			if err := v.Validate(req, c.status, h, b); err != nil {
				t.Errorf("valid exchange rejected: %v", err)
			}
		})
	}
}

func TestInvalidResponses(t *testing.T) {
	v := NewValidator(t)
	q := "?marketId=" + marketID
	tooDeep := map[string]any{"bids": []any{}, "asks": []any{}, "lastTradePrice": nil}
	var levels []any
	for i := range 11 {
		levels = append(levels, level(40-i, 1, i+1))
	}
	tooDeep["bids"] = levels
	cases := []struct {
		exchange
		want string // a substring of the error
	}{
		{exchange{"missing field", "GET", "/market" + q, 201, nil, del(market(), "labelA")}, `"labelA"`},
		{exchange{"missing nullable field", "GET", "/market" + q, 201, nil, del(market(), "outcome")}, `"outcome"`},
		{exchange{"null non-nullable", "GET", "/market" + q, 201, nil, set(market(), "question", nil)}, "/question"},
		{exchange{"wrong type", "GET", "/market" + q, 201, nil, set(market(), "resolved", "false")}, "/resolved"},
		{exchange{"wrong enum market status", "GET", "/markets", 200, nil, map[string]any{"markets": []any{set(market(), "status", "CANCELLED")}}}, "/markets/0/status"},
		{exchange{"wrong enum outcome", "GET", "/market" + q, 201, nil, set(resolvedMarket(), "outcome", "MAYBE")}, "/outcome"},
		{exchange{"bad date-time", "GET", "/market" + q, 201, nil, set(market(), "createdAt", "2030-05-01 12:00:00")}, "/createdAt"},
		{exchange{"uppercase uuid", "GET", "/market" + q, 201, nil, set(market(), "id", strings.ToUpper(marketID))}, "/id"},
		{exchange{"GET /market answered 200", "GET", "/market" + q, 200, nil, market()}, "is not documented"},
		{exchange{"markets without envelope", "GET", "/markets", 200, nil, []any{market()}}, "object"},
		{exchange{"fractional price", "GET", "/market/order-book" + q, 200, nil, book()}, "/orderBookYes/bids/0/price"},
		{exchange{"price 100", "POST", "/order", 201, nil, set(placed(), "price", 100)}, "/price"},
		{exchange{"price 0 in trade", "GET", "/market/trades" + q, 200, nil, []any{set(trade(), "price", 0)}}, "/0/price"},
		{exchange{"quantity as string", "POST", "/order", 201, nil, set(placed(), "quantity", "10")}, "/quantity"},
		{exchange{"negative filled", "GET", "/order?orderId=" + orderID, 200, nil, set(order(), "filledQuantity", -1)}, "/filledQuantity"},
		{exchange{"order status wrong enum", "GET", "/order?orderId=" + orderID, 200, nil, set(order(), "status", "CANCELED")}, "/status"},
		{exchange{"placed without trades", "POST", "/order", 201, nil, order()}, `"trades"`},
		{exchange{"cancelled still open", "POST", "/cancel-order", 200, nil, order()}, "/status"},
		{exchange{"cancel everything open order", "POST", "/cancel-everything", 200, nil, []any{set(order(), "status", "OPEN")}}, "/0/status"},
		{exchange{"cancel everything empty body", "POST", "/cancel-everything", 200, nil, ""}, "decode"},
		{exchange{"book too deep", "GET", "/market/order-book" + q, 200, nil, set(book(), "orderBookNo", tooDeep)}, "/orderBookNo/bids"},
		{exchange{"book level quantity 0", "GET", "/market/order-book" + q, 200, nil, set(emptyBook(), "orderBookYes", map[string]any{"bids": []any{level(40, 0, 0)}, "asks": []any{}, "lastTradePrice": nil})}, "/orderBookYes/bids/0/quantity"},
		{exchange{"position quantity 0", "GET", "/positions", 200, nil, map[string]any{"positions": []any{set(position(), "quantity", 0)}}}, "/positions/0/quantity"},
		{exchange{"account negative cash", "GET", "/account", 200, nil, set(account(), "available", -5)}, "/available"},
		{exchange{"orders without nextCursor", "GET", "/orders", 200, nil, map[string]any{"orders": []any{}}}, `"nextCursor"`},
		{exchange{"undocumented status 500", "GET", "/markets", 500, nil, apiError("internal")}, "is not documented"},
		{exchange{"undocumented status 404", "GET", "/markets", 404, nil, apiError("not_found")}, "is not documented"},
		{exchange{"redirect", "GET", "/markets", 301, http.Header{"Location": {"/api/v1/markets/"}}, ""}, "is not documented"},
		{exchange{"undocumented status 409 on cancel", "POST", "/cancel-order", 409, nil, apiError("conflict")}, "is not documented"},
		{exchange{"401 without WWW-Authenticate", "GET", "/positions", 401, nil, apiError("unauthorized")}, "WWW-Authenticate"},
		{exchange{"401 with Basic challenge", "GET", "/positions", 401, http.Header{"Content-Type": {"application/json"}, "Www-Authenticate": {"Basic"}}, apiError("unauthorized")}, "WWW-Authenticate"},
		{exchange{"error without error", "POST", "/order", 400, nil, map[string]any{"details": map[string]any{"code": "x"}}}, `"error"`},
		{exchange{"error details without code", "POST", "/order", 400, nil, map[string]any{"error": "x", "details": map[string]any{"field": "price"}}}, `"code"`},
		{exchange{"error as plain text", "POST", "/order", 400, http.Header{"Content-Type": {"text/plain"}}, "bad request"}, "text/plain"},
		{exchange{"no content type", "GET", "/account", 200, http.Header{}, account()}, "Content-Type"},
		{exchange{"not JSON", "GET", "/account", 200, nil, "{"}, "decode"},
		{exchange{"unknown path", "GET", "/nope", 200, nil, map[string]any{}}, "no operation"},
		{exchange{"outside server prefix", "GET", "http://127.0.0.1:12345/markets", 200, nil, map[string]any{"markets": []any{}}}, "no operation"},
		{exchange{"undocumented method", "DELETE", "/markets", 200, nil, map[string]any{"markets": []any{}}}, "no operation"},
		{exchange{"invalid request accepted: malformed uuid", "GET", "/market?marketId=not-a-uuid", 201, nil, market()}, "accepted a request"},
		{exchange{"invalid request accepted: missing marketId", "GET", "/market/order-book", 200, nil, emptyBook()}, "accepted a request"},
		{exchange{"invalid request accepted: unknown status", "GET", "/markets?status=ACTIVE", 200, nil, map[string]any{"markets": []any{}}}, "accepted a request"},
		{exchange{"invalid request accepted: limit 501", "GET", "/market/trades" + q + "&limit=501", 200, nil, []any{}}, "accepted a request"},
		{exchange{"invalid request accepted: limit 0", "GET", "/orders?limit=0", 200, nil, map[string]any{"orders": []any{}, "nextCursor": nil}}, "accepted a request"},
	}
	// The one fixture that needs a fractional number cannot be built with ints.
	fractional := book()
	fractional["orderBookYes"].(map[string]any)["bids"].([]any)[0].(map[string]any)["price"] = 40.5
	for i := range cases {
		if cases[i].name == "fractional price" {
			cases[i].body = fractional
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := c.request()
			h, b := c.parts(t)
			err := v.Validate(req, c.status, h, b)
			if err == nil {
				t.Fatalf("invalid exchange accepted: %s %s -> %d %s", c.method, c.target, c.status, b)
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{c.method, req.URL.Path, fmt.Sprint(c.status), c.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
		})
	}
}

// The document must list exactly the statuses the API contract gives each operation
// (docs/architecture.md §2) plus the success status (and the documented pmx additions).
func TestDocumentedStatuses(t *testing.T) {
	v := NewValidator(t)
	want := []string{
		"DELETE /account/keys/{id} 204", "DELETE /account/keys/{id} 400", "DELETE /account/keys/{id} 401", "DELETE /account/keys/{id} 403", "DELETE /account/keys/{id} 404", "DELETE /account/keys/{id} 429",
		"DELETE /order-groups/{id} 204", "DELETE /order-groups/{id} 400", "DELETE /order-groups/{id} 401", "DELETE /order-groups/{id} 403", "DELETE /order-groups/{id} 404", "DELETE /order-groups/{id} 409", "DELETE /order-groups/{id} 429",
		"GET /account 200", "GET /account 401", "GET /account 403", "GET /account 429",
		"GET /account/events 200", "GET /account/events 400", "GET /account/events 401", "GET /account/events 403", "GET /account/events 410", "GET /account/events 429",
		"GET /account/fees 200", "GET /account/fees 400", "GET /account/fees 401", "GET /account/fees 403", "GET /account/fees 429",
		"GET /account/keys 200", "GET /account/keys 401", "GET /account/keys 403", "GET /account/keys 429",
		"GET /account/limits 200", "GET /account/limits 401", "GET /account/limits 403", "GET /account/limits 429",
		"GET /account/risk-limits 200", "GET /account/risk-limits 401", "GET /account/risk-limits 403", "GET /account/risk-limits 429",
		"GET /event 200", "GET /event 400", "GET /event 401", "GET /event 403", "GET /event 404", "GET /event 429",
		"GET /events 200", "GET /events 400", "GET /events 401", "GET /events 403", "GET /events 429",
		"GET /fills 200", "GET /fills 400", "GET /fills 401", "GET /fills 403", "GET /fills 429",
		"GET /market 201", "GET /market 400", "GET /market 401", "GET /market 403", "GET /market 404", "GET /market 429",
		"GET /market/candles 200", "GET /market/candles 400", "GET /market/candles 401", "GET /market/candles 403", "GET /market/candles 429",
		"GET /market/events 200", "GET /market/events 400", "GET /market/events 401", "GET /market/events 403", "GET /market/events 410", "GET /market/events 429",
		"GET /market/order-book 200", "GET /market/order-book 400", "GET /market/order-book 401", "GET /market/order-book 403", "GET /market/order-book 429",
		"GET /market/trades 200", "GET /market/trades 400", "GET /market/trades 401", "GET /market/trades 403", "GET /market/trades 429",
		"GET /markets 200", "GET /markets 400", "GET /markets 401", "GET /markets 403", "GET /markets 429",
		"GET /order 200", "GET /order 400", "GET /order 401", "GET /order 403", "GET /order 404", "GET /order 429",
		"GET /order-groups 200", "GET /order-groups 400", "GET /order-groups 401", "GET /order-groups 403", "GET /order-groups 429",
		"GET /order-groups/{id} 200", "GET /order-groups/{id} 400", "GET /order-groups/{id} 401", "GET /order-groups/{id} 403", "GET /order-groups/{id} 404", "GET /order-groups/{id} 429",
		"GET /order/queue-position 200", "GET /order/queue-position 400", "GET /order/queue-position 401", "GET /order/queue-position 403", "GET /order/queue-position 404", "GET /order/queue-position 409", "GET /order/queue-position 429",
		"GET /orders 200", "GET /orders 400", "GET /orders 401", "GET /orders 403", "GET /orders 429",
		"GET /orders/queue-positions 200", "GET /orders/queue-positions 400", "GET /orders/queue-positions 401", "GET /orders/queue-positions 403", "GET /orders/queue-positions 429",
		"GET /positions 200", "GET /positions 401", "GET /positions 403", "GET /positions 404", "GET /positions 429",
		"GET /series 200", "GET /series 400", "GET /series 401", "GET /series 403", "GET /series 429",
		"GET /series/{id} 200", "GET /series/{id} 400", "GET /series/{id} 401", "GET /series/{id} 403", "GET /series/{id} 404", "GET /series/{id} 429",
		"GET /settlements 200", "GET /settlements 400", "GET /settlements 401", "GET /settlements 403", "GET /settlements 429",
		"POST /account/keys 201", "POST /account/keys 400", "POST /account/keys 401", "POST /account/keys 403", "POST /account/keys 409", "POST /account/keys 429",
		"POST /cancel-everything 200", "POST /cancel-everything 401", "POST /cancel-everything 403", "POST /cancel-everything 429",
		"POST /cancel-order 200", "POST /cancel-order 400", "POST /cancel-order 401", "POST /cancel-order 403", "POST /cancel-order 404", "POST /cancel-order 429",
		"POST /event/convert 200", "POST /event/convert 201", "POST /event/convert 400", "POST /event/convert 401", "POST /event/convert 403", "POST /event/convert 404", "POST /event/convert 409", "POST /event/convert 429",
		"POST /heartbeat 200", "POST /heartbeat 400", "POST /heartbeat 401", "POST /heartbeat 403", "POST /heartbeat 429",
		"POST /order 200", "POST /order 201", "POST /order 400", "POST /order 401", "POST /order 403", "POST /order 409", "POST /order 429",
		"POST /order-groups 201", "POST /order-groups 400", "POST /order-groups 401", "POST /order-groups 403", "POST /order-groups 409", "POST /order-groups 429",
		"POST /order-groups/{id}/reset 200", "POST /order-groups/{id}/reset 400", "POST /order-groups/{id}/reset 401", "POST /order-groups/{id}/reset 403", "POST /order-groups/{id}/reset 404", "POST /order-groups/{id}/reset 429",
		"POST /order/amend 200", "POST /order/amend 400", "POST /order/amend 401", "POST /order/amend 403", "POST /order/amend 404", "POST /order/amend 409", "POST /order/amend 429",
		"POST /orders/batch 201", "POST /orders/batch 400", "POST /orders/batch 401", "POST /orders/batch 403", "POST /orders/batch 429",
		"POST /orders/cancel 200", "POST /orders/cancel 400", "POST /orders/cancel 401", "POST /orders/cancel 403", "POST /orders/cancel 429",
		"POST /ws-token 201", "POST /ws-token 401", "POST /ws-token 403", "POST /ws-token 429",
		"PUT /account/risk-limits 200", "PUT /account/risk-limits 400", "PUT /account/risk-limits 401", "PUT /account/risk-limits 403", "PUT /account/risk-limits 429",
	}
	if got := v.Documented(); !slices.Equal(got, want) {
		t.Errorf("documented statuses:\n got %q\nwant %q", got, want)
	}
	// Every 401 carries the required WWW-Authenticate header; every response but a 204 has a JSON
	// body, and a 204 none;
	// every operation requires the bearer scheme, or a signing key's prefix (Signed requests).
	for path, item := range v.Document().Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security == nil || len(*op.Security) != 2 || (*op.Security)[0]["bearer"] == nil || (*op.Security)[1]["ed25519Prefix"] == nil {
				t.Errorf("%s %s: security is not exactly bearer or ed25519Prefix", method, path)
			}
			if op.OperationID == "" || op.Description == "" {
				t.Errorf("%s %s: missing operationId or description", method, path)
			}
			for status, resp := range op.Responses.Map() {
				if status == "204" {
					if len(resp.Value.Content) > 0 {
						t.Errorf("%s %s 204: a body is documented for No Content", method, path)
					}
				} else if resp.Value.Content.Get("application/json") == nil {
					t.Errorf("%s %s %s: no application/json body", method, path, status)
				}
				if status == "401" {
					h := resp.Value.Headers["WWW-Authenticate"]
					if h == nil || !h.Value.Required {
						t.Errorf("%s %s 401: WWW-Authenticate is not a required header", method, path)
					}
				}
			}
		}
	}
	if len(v.Document().Servers) != 1 || v.Document().Servers[0].URL != "/api/v1" {
		t.Errorf("servers = %v, want one with url /api/v1", v.Document().Servers)
	}
}

func TestCoverage(t *testing.T) {
	v := NewValidator(t)
	if got, want := len(v.Uncovered()), len(v.Documented()); got != want {
		t.Fatalf("fresh validator: %d uncovered, want all %d", got, want)
	}
	req := httptest.NewRequest("GET", base+"/market?marketId="+marketID, nil)
	b, _ := json.Marshal(market())
	_ = v.Validate(req, 201, jsonHeader, b)
	// A documented status with a bad body still counts as exercised (the failure is reported).
	_ = v.Validate(req, 404, jsonHeader, []byte(`{}`))
	// Undocumented statuses and paths do not count.
	_ = v.Validate(req, 500, jsonHeader, []byte(`{}`))
	_ = v.Validate(httptest.NewRequest("GET", base+"/nope", nil), 200, jsonHeader, []byte(`{}`))

	covered := v.Covered()
	if len(covered) != 2 || !covered["GET /market 201"] || !covered["GET /market 404"] {
		t.Errorf("Covered() = %v, want GET /market 201 and 404", covered)
	}
	un := v.Uncovered()
	if len(un) != len(v.Documented())-2 || slices.Contains(un, "GET /market 201") || !slices.Contains(un, "GET /market 400") {
		t.Errorf("Uncovered() = %v", un)
	}
	covered["GET /market 400"] = true // a copy: must not affect the validator
	if !slices.Contains(v.Uncovered(), "GET /market 400") {
		t.Error("Covered() returned the validator's own map")
	}
}

// fakeTB records what CheckResponse and Do report instead of failing the real test.
type fakeTB struct {
	testing.TB // nil: calling anything not overridden panics
	mu         sync.Mutex
	errors     []string
	fatal      bool
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	f.fatal = true
	panic(f)
}

func TestCheckResponse(t *testing.T) {
	v := NewValidator(t)
	req := httptest.NewRequest("GET", base+"/account", nil)
	good, _ := json.Marshal(account())
	bad, _ := json.Marshal(del(account(), "locked"))

	var ok fakeTB
	v.CheckResponse(&ok, req, 200, jsonHeader, good)
	if len(ok.errors) != 0 {
		t.Errorf("valid response reported: %q", ok.errors)
	}
	var ko fakeTB
	v.CheckResponse(&ko, req, 200, jsonHeader, bad)
	if len(ko.errors) != 1 {
		t.Fatalf("invalid response: %d errors reported, want 1", len(ko.errors))
	}
	for _, want := range []string{"GET /api/v1/account", "-> 200", `"locked"`, `"name":"bot-1"`} {
		if !strings.Contains(ko.errors[0], want) {
			t.Errorf("report %q does not mention %q", ko.errors[0], want)
		}
	}
}

func TestDo(t *testing.T) {
	v := NewValidator(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		switch {
		case r.Header.Get("Authorization") == "":
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(401)
			_ = json.NewEncoder(w).Encode(apiError("unauthorized"))
		case r.URL.Path == "/api/v1/market":
			w.WriteHeader(201)
			_ = json.NewEncoder(w).Encode(market())
		case r.URL.Path == "/api/v1/cancel-everything":
			body, _ := io.ReadAll(r.Body)
			if len(body) != 0 {
				w.WriteHeader(500)
				return
			}
			_, _ = w.Write([]byte(`[]`))
		default: // wrong: 200 where the document says 201 would be needed elsewhere, here a bad body
			_ = json.NewEncoder(w).Encode(map[string]any{"markets": "none"})
		}
	}))
	defer srv.Close()

	newReq := func(method, path string, auth bool) *http.Request {
		req, err := http.NewRequest(method, srv.URL+"/api/v1"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.Header.Set("Authorization", "Bearer k")
		}
		return req
	}

	var f fakeTB
	if status, body := v.Do(&f, srv.Client(), newReq("GET", "/market?marketId="+marketID, true)); status != 201 || !strings.Contains(string(body), marketID) {
		t.Errorf("GET /market: %d %s", status, body)
	}
	if status, _ := v.Do(&f, srv.Client(), newReq("POST", "/cancel-everything", true)); status != 200 {
		t.Errorf("POST /cancel-everything: %d", status)
	}
	resp, _ := v.DoResponse(&f, srv.Client(), newReq("GET", "/positions", false))
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("GET /positions without key: %d %v", resp.StatusCode, resp.Header)
	}
	if len(f.errors) != 0 {
		t.Errorf("valid exchanges reported: %q", f.errors)
	}
	if status, _ := v.Do(&f, srv.Client(), newReq("GET", "/markets", true)); status != 200 {
		t.Errorf("GET /markets: %d", status)
	}
	if len(f.errors) != 1 || !strings.Contains(f.errors[0], "/markets") {
		t.Errorf("bad /markets body: reports %q, want one", f.errors)
	}
	covered := v.Covered()
	for _, k := range []string{"GET /market 201", "POST /cancel-everything 200", "GET /positions 401", "GET /markets 200"} {
		if !covered[k] {
			t.Errorf("%s not recorded as covered: %v", k, covered)
		}
	}

	// A transport error is fatal.
	var g fakeTB
	func() {
		defer func() { _ = recover() }()
		req, _ := http.NewRequest("GET", "http://127.0.0.1:1/api/v1/markets", nil)
		v.Do(&g, srv.Client(), req)
	}()
	if !g.fatal {
		t.Error("transport error did not fail the test fatally")
	}
}

func TestConcurrentUse(t *testing.T) {
	v := NewValidator(t)
	b, _ := json.Marshal(map[string]any{"markets": []any{market()}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				req := httptest.NewRequest("GET", base+"/markets?status=OPEN", nil)
				if err := v.Validate(req, 200, jsonHeader, b); err != nil {
					t.Error(err)
					return
				}
				_ = v.Uncovered()
			}
		})
	}
	wg.Wait()
}

func TestNewFromDocumentRejectsBadDocuments(t *testing.T) {
	for name, doc := range map[string]string{
		"not YAML":    "{",
		"invalid":     "openapi: 3.0.3\ninfo: {title: x}\npaths: {}\n",
		"default key": "openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths:\n  /a:\n    get:\n      responses:\n        default: {description: x}\n",
	} {
		if _, err := NewFromDocument([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
