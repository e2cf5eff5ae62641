package exchangetest

import (
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
)

// TestScopeRefusal checks that a 403 insufficient_scope is answered as every answer to an
// account: with the RateLimit headers, on a connection the next request reuses; and that it spends
// nothing. The write bucket holds 3 and refills one token in 1,000 s, so after ten refusals the
// account still places exactly 3 orders, and the fourth is refused for the rate.
func TestScopeRefusal(t *testing.T) {
	tg := StartDev(t, func(c *apiserver.Config) { c.WriteLimit = ratelimit.Limit{Rate: 0.001, Burst: 3} })
	trader := tg.NewAccount(t, "refusal")
	reader := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeRead})
	m := tg.NewMarket(t, nil)

	// One connection at most, whose reuse each request reports.
	h := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: time.Minute}
	t.Cleanup(h.CloseIdleConnections)
	for i := range 10 {
		var reused bool
		req := tg.request(t, "POST", "/api/v1/order", "Bearer "+reader.Key, OrderBody(m.ID, "BUY", "YES", 40, 1))
		req = req.WithContext(httptrace.WithClientTrace(req.Context(),
			&httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }}))
		resp, raw := tg.Validator.DoResponse(t, h, req)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a read key's POST /order: %d %s, want 403 insufficient_scope", resp.StatusCode, raw)
		}
		if resp.Header.Get("RateLimit-Limit") != "3" || resp.Header.Get("RateLimit-Remaining") != "3" || resp.Header.Get("RateLimit-Reset") == "" {
			t.Errorf("refusal %d: RateLimit-Limit %q, -Remaining %q, -Reset %q; want the write bucket's 3, 3 and a reset", i,
				resp.Header.Get("RateLimit-Limit"), resp.Header.Get("RateLimit-Remaining"), resp.Header.Get("RateLimit-Reset"))
		}
		if resp.Close {
			t.Errorf("refusal %d: the server closed the connection (Connection: close)", i)
		}
		if i > 0 && !reused {
			t.Errorf("refusal %d: sent on a new connection, the previous refusal's was not kept alive", i)
		}
	}
	for i := range 3 {
		trader.Expect(t, "POST", "/order", OrderBody(m.ID, "BUY", "YES", 40+i, 1), http.StatusCreated, nil)
	}
	trader.ExpectError(t, "POST", "/order", OrderBody(m.ID, "BUY", "YES", 45, 1), http.StatusTooManyRequests, "rate_limited")
}
