package exchangetest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
)

// TestRateLimitCountsBatchOrders checks that a batch spends a write per order: with a burst of 20
// writes (refilling one a second), a batch of 20 orders spends the bucket, and the next write is
// refused, with nothing changed, until it refills.
func TestRateLimitCountsBatchOrders(t *testing.T) {
	tg := StartDev(t, func(c *apiserver.Config) { c.WriteLimit = ratelimit.Limit{Rate: 1, Burst: 20} })
	a := tg.NewAccount(t, "batch")
	m := tg.NewMarket(t, nil)
	orders := make([]any, 20)
	for i := range orders {
		orders[i] = OrderBody(m.ID, "BUY", "YES", 1+i, 1)
	}
	resp, raw := a.DoResponse(t, "POST", "/orders/batch", map[string]any{"orders": orders})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a batch of 20 within a burst of 20: %d %s", resp.StatusCode, raw)
	}
	if rem := resp.Header.Get("RateLimit-Remaining"); rem != "0" {
		t.Errorf("RateLimit-Remaining %q after spending the burst", rem)
	}
	e := a.ExpectError(t, "POST", "/order", OrderBody(m.ID, "BUY", "YES", 50, 1), http.StatusTooManyRequests, "rate_limited")
	if !strings.Contains(e.Error, "retry after") {
		t.Errorf("the refusal says %q", e.Error)
	}
	var open struct{ Orders []any }
	a.Expect(t, "GET", "/orders?marketId="+m.ID.String(), nil, http.StatusOK, &open)
	if len(open.Orders) != 20 {
		t.Errorf("%d open orders, want the batch's 20 and not the refused one", len(open.Orders))
	}
}
