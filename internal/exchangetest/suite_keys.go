package exchangetest

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/poll"
)

// Keys' rights (internal/kit/auth, apiserver/routes.go): scopes, expiry and address allowlists,
// each refusal with nothing done, GET /account/keys, the admin API's key choices, and the key API.

// keyCall is a request that a key's rights may refuse, and the scope it needs.
type keyCall struct {
	method, path string
	body         any
	need         auth.Scope
}

func testKeys(t *testing.T, tg *Target) {
	t.Run("Listing", func(t *testing.T) { testKeyListing(t, tg) })
	t.Run("AdminChoices", func(t *testing.T) { testKeyAdminChoices(t, tg) })
	t.Run("Scopes", func(t *testing.T) { testKeyScopes(t, tg) })
	t.Run("Allowlist", func(t *testing.T) { testKeyAllowlist(t, tg) })
	t.Run("Expiry", func(t *testing.T) { testKeyExpiry(t, tg) })
	t.Run("WSTokenInheritsItsKey", func(t *testing.T) { testWSTokenKey(t, tg) })
	t.Run("Signed", func(t *testing.T) { testSignedRequests(t, tg) })
	t.Run("API", func(t *testing.T) { testKeyAPI(t, tg) }) // suite_keyapi.go
}

// keysOf lists c's account's keys with c's key.
func keysOf(t *testing.T, c *Client) []apiserver.APIKey {
	t.Helper()
	var out struct{ Keys []apiserver.APIKey }
	raw := c.Expect(t, "GET", "/account/keys", nil, http.StatusOK, &out)
	// A key is pmx_<prefix>_<secret>, and the secret's alphabet (base64url) has '_' in it too. A
	// signing client may hold the prefix alone, with no secret to show.
	_, secret, ok := strings.Cut(strings.TrimPrefix(c.Key, "pmx_"), "_")
	if ok && secret != "" && strings.Contains(string(raw), secret) {
		t.Fatalf("GET /account/keys shows a key's secret: %s", raw)
	}
	return out.Keys
}

func testKeyListing(t *testing.T, tg *Target) {
	c := tg.NewAccount(t, "keys")
	keys := keysOf(t, c)
	if len(keys) != 1 || !keys[0].Current || keys[0].Scope != "trade" || keys[0].ExpiresAt != nil ||
		len(keys[0].IPAllowlist) != 0 || keys[0].RevokedAt != nil || !strings.HasPrefix(c.Key, keys[0].Prefix+"_") {
		t.Fatalf("a new account's keys: %+v, want its one key, trade, current, without expiry or allowlist", keys)
	}
	// The key's first use is written at once, off the request's path; later ones once a minute.
	poll.Wait(t, 10*time.Second, "the key's last use listed", func() bool { return keysOf(t, c)[0].LastUsedAt != nil })
	tg.Anonymous().ExpectError(t, "GET", "/account/keys", nil, http.StatusUnauthorized, "missing_api_key")

	// Another account's keys are not listed, and a second key is listed as not the current one.
	other := tg.NewAccount(t, "keys")
	reader := tg.AddKey(t, c, auth.KeySpec{Label: "watcher", Scope: auth.ScopeRead})
	keys = keysOf(t, reader)
	if len(keys) != 2 || keys[0].Label != "watcher" || !keys[0].Current || keys[1].Current || keys[0].Scope != "read" {
		t.Fatalf("keys listed by the second key: %+v", keys)
	}
	if slices.ContainsFunc(keys, func(k apiserver.APIKey) bool { return strings.HasPrefix(other.Key, k.Prefix+"_") }) {
		t.Fatal("another account's key is listed")
	}
}

func testKeyAdminChoices(t *testing.T, tg *Target) {
	expires := time.Now().UTC().Add(30 * 24 * time.Hour).Truncate(time.Second)
	c := tg.NewAccountWithKey(t, "keys", map[string]any{"scope": "cancel", "expiresAt": expires.Format(time.RFC3339),
		"ipAllowlist": []string{"0.0.0.0/0", "::/0"}})
	keys := keysOf(t, c)
	if len(keys) != 1 || keys[0].Scope != "cancel" || keys[0].ExpiresAt == nil || !keys[0].ExpiresAt.Equal(expires) ||
		!slices.Equal(keys[0].IPAllowlist, []string{"0.0.0.0/0", "::/0"}) {
		t.Fatalf("the admin API's key: %+v, want cancel, expiring at %v, from anywhere", keys, expires)
	}
	// Refused choices open no account.
	for _, bad := range []struct {
		name  string
		key   map[string]any
		field string
	}{
		{"unknown scope", map[string]any{"scope": "admin"}, "scope"},
		{"scope not a string", map[string]any{"scope": 3}, "scope"},
		{"expiry over a year", map[string]any{"expiresAt": time.Now().AddDate(1, 0, 2).UTC().Format(time.RFC3339)}, "expiresAt"},
		{"expiry past", map[string]any{"expiresAt": "2020-01-01T00:00:00Z"}, "expiresAt"},
		{"expiry not a time", map[string]any{"expiresAt": "tomorrow"}, "expiresAt"},
		{"range with host bits", map[string]any{"ipAllowlist": []string{"10.0.0.1/8"}}, "ipAllowlist"},
		{"not an address", map[string]any{"ipAllowlist": []string{"office"}}, "ipAllowlist"},
		{"too many ranges", map[string]any{"ipAllowlist": slices.Repeat([]string{"10.0.0.0/8"}, auth.MaxAllowlist+1)}, "ipAllowlist"},
		{"allowlist not an array", map[string]any{"ipAllowlist": "10.0.0.0/8"}, "ipAllowlist"},
	} {
		name := "refused-" + strings.ReplaceAll(bad.name, " ", "-")
		body := map[string]any{"name": name}
		for k, v := range bad.key {
			body[k] = v
		}
		var e ErrorBody
		tg.Admin(t, "POST", "/admin/v1/accounts", body, http.StatusBadRequest, &e)
		if e.Details.Field != bad.field || e.Error == "" {
			t.Errorf("%s: %+v, want a 400 on %s", bad.name, e, bad.field)
		}
		var n int
		if err := tg.Store.Pool.QueryRow(context.Background(), `select count(*) from accounts where name = $1`, name).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d accounts opened (%v), want none", bad.name, n, err)
		}
	}
}

// keyState is what a refused request must leave as it was: the account's cash and its order.
func keyState(t *testing.T, c *Client, order string) string {
	t.Helper()
	available, locked := c.Balance(t)
	var o apiserver.Order
	c.Expect(t, "GET", "/order?orderId="+order, nil, http.StatusOK, &o)
	var orders struct{ Orders []apiserver.Order }
	c.Expect(t, "GET", "/orders", nil, http.StatusOK, &orders)
	return fmt.Sprintf("available %d, locked %d, order %s with %d left, %d orders", available, locked, o.Status,
		o.Quantity-o.FilledQuantity, len(orders.Orders))
}

func testKeyScopes(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	trader := tg.NewAccount(t, "scopes")
	resting := trader.Place(t, m.ID, "BUY", "YES", 40, 5)
	before := keyState(t, trader, resting.ID.String())
	calls := []keyCall{
		{"POST", "/order", OrderBody(m.ID, "BUY", "YES", 41, 1), auth.ScopeTrade},
		{"POST", "/order/amend", map[string]any{"orderId": resting.ID, "quantity": 3}, auth.ScopeTrade},
		{"POST", "/orders/batch", map[string]any{"orders": []any{OrderBody(m.ID, "BUY", "YES", 41, 1)}}, auth.ScopeTrade},
		{"POST", "/cancel-order", map[string]any{"orderId": resting.ID}, auth.ScopeCancel},
		{"POST", "/cancel-everything", nil, auth.ScopeCancel},
		{"POST", "/orders/cancel", map[string]any{"orderIds": []any{resting.ID}}, auth.ScopeCancel},
		{"POST", "/heartbeat", map[string]any{"timeoutSeconds": 300}, auth.ScopeCancel},
	}
	var limits struct{ Writes struct{ Limited bool } }
	trader.Expect(t, "GET", "/account/limits", nil, http.StatusOK, &limits)
	for _, scope := range []auth.Scope{auth.ScopeRead, auth.ScopeCancel} {
		c := tg.AddKey(t, trader, auth.KeySpec{Scope: scope})
		for _, call := range calls {
			if scope.Allows(call.need) {
				continue
			}
			resp, raw := c.DoResponse(t, call.method, call.path, call.body)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(raw), `"code":"insufficient_scope"`) ||
				!strings.Contains(string(raw), `"field":"`+string(call.need)+`"`) {
				t.Errorf("%s key, %s %s: %d %s, want 403 insufficient_scope naming %s", scope, call.method, call.path, resp.StatusCode, raw, call.need)
			}
			// Like every answer to an account, it says where the account stands (TestScopeRefusal
			// checks that nothing was spent), and the connection stays open for the next request.
			if limits.Writes.Limited && resp.Header.Get("RateLimit-Remaining") == "" {
				t.Errorf("%s key, %s %s: a scope refusal without the RateLimit headers", scope, call.method, call.path)
			}
			if resp.Close {
				t.Errorf("%s key, %s %s: a scope refusal closed the connection", scope, call.method, call.path)
			}
		}
		if after := keyState(t, trader, resting.ID.String()); after != before {
			t.Fatalf("%s key: refused requests changed the account: %s, was %s", scope, after, before)
		}
		// What the scope does allow: every read, a feed token, the feed.
		c.Expect(t, "GET", "/account", nil, http.StatusOK, nil)
		c.Expect(t, "GET", "/orders", nil, http.StatusOK, nil)
		c.Expect(t, "GET", "/market/order-book?marketId="+m.ID.String(), nil, http.StatusOK, nil)
		c.Expect(t, "POST", "/ws-token", nil, http.StatusCreated, nil)
		c.DialFeed(t).Close()
	}
	var hb struct{ Armed bool }
	reader := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeRead})
	if _, err := reader.DialFeedQuery(context.Background(), "cancelOnDisconnect=true"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a read key's feed with cancelOnDisconnect: %v, want a 403", err)
	}

	// A cancel key stops a bot: it arms and disarms the dead-man switch and cancels.
	canceller := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeCancel})
	canceller.Expect(t, "POST", "/heartbeat", map[string]any{"timeoutSeconds": 300}, http.StatusOK, &hb)
	canceller.Expect(t, "POST", "/heartbeat", map[string]any{"timeoutSeconds": 0}, http.StatusOK, &hb)
	var cancelled apiserver.Order
	canceller.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": resting.ID}, http.StatusOK, &cancelled)
	if cancelled.Status != "CANCELLED" {
		t.Fatalf("cancelled by a cancel key: %+v", cancelled)
	}
	canceller.Expect(t, "POST", "/cancel-everything", nil, http.StatusOK, nil)
	if _, locked := trader.Balance(t); locked != 0 {
		t.Fatalf("%d cents still locked after the cancel key cancelled", locked)
	}
}

// documentedCalls are every keyed operation of the OpenAPI document, with a body for each POST.
func documentedCalls(t *testing.T, tg *Target, body any) []keyCall {
	var calls []keyCall
	for path, item := range tg.Validator.Document().Paths.Map() {
		for method := range item.Operations() {
			c := keyCall{method: method, path: path}
			if method == http.MethodPost {
				c.body = body
			}
			calls = append(calls, c)
		}
	}
	if len(calls) < 20 {
		t.Fatalf("only %d operations documented", len(calls))
	}
	return calls
}

func testKeyAllowlist(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	trader := tg.NewAccount(t, "allowlist")
	resting := trader.Place(t, m.ID, "BUY", "YES", 40, 5)
	before := keyState(t, trader, resting.ID.String())
	// Documentation ranges, from which no test client connects.
	fenced := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeTrade,
		Allowlist: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")}})
	for _, call := range documentedCalls(t, tg, OrderBody(m.ID, "BUY", "YES", 41, 1)) {
		e := fenced.ExpectError(t, call.method, call.path, call.body, http.StatusForbidden, "ip_not_allowed")
		if !strings.Contains(e.Error, "came from") {
			t.Fatalf("%s %s: %q does not say the address seen", call.method, call.path, e.Error)
		}
	}
	if _, err := fenced.TryDialFeed(context.Background()); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("the feed from outside the allowlist: %v, want a 403", err)
	}
	if after := keyState(t, trader, resting.ID.String()); after != before {
		t.Fatalf("refused requests changed the account: %s, was %s", after, before)
	}
	open := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeTrade,
		Allowlist: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}})
	open.Expect(t, "GET", "/account", nil, http.StatusOK, nil)
}

func testKeyExpiry(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	trader := tg.NewAccount(t, "expiry")
	resting := trader.Place(t, m.ID, "BUY", "YES", 40, 5)
	before := keyState(t, trader, resting.ID.String())
	past := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	expired := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeTrade, ExpiresAt: &past})
	for _, call := range documentedCalls(t, tg, OrderBody(m.ID, "BUY", "YES", 41, 1)) {
		expired.ExpectError(t, call.method, call.path, call.body, http.StatusUnauthorized, "key_expired")
	}
	if after := keyState(t, trader, resting.ID.String()); after != before {
		t.Fatalf("an expired key's requests changed the account: %s, was %s", after, before)
	}
	future := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
	tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeTrade, ExpiresAt: &future}).Expect(t, "GET", "/account", nil, http.StatusOK, nil)
}

// testWSTokenKey: a feed token connects with its key's rights, checked when it connects: a token
// whose key was revoked since it was fetched is refused.
func testWSTokenKey(t *testing.T, tg *Target) {
	trader := tg.NewAccount(t, "wstoken")
	c := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeRead})
	var tok struct{ Token string }
	c.Expect(t, "POST", "/ws-token", nil, http.StatusCreated, &tok)
	keys := keysOf(t, c)
	if _, err := tg.Store.Pool.Exec(context.Background(), `update api_keys set revoked_at = now() where id = $1`, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DialFeedQuery(context.Background(), "token="+tok.Token); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a token of a revoked key: %v, want a 401", err)
	}
	// A token of a live key connects with its rights.
	c2 := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeRead})
	c2.Expect(t, "POST", "/ws-token", nil, http.StatusCreated, &tok)
	f, err := c2.DialFeedQuery(context.Background(), "token="+tok.Token)
	if err != nil {
		t.Fatalf("a read key's token: %v", err)
	}
	f.Close()
}
