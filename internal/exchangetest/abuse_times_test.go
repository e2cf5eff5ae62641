package exchangetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	abuseFarPace = 100 * time.Millisecond // the far-time attacker's pace: 10 requests a second
	abuseFarTime = 10 * time.Second       // how long it keeps at it
)

// TestAbuseTimes sends, from the attacker's address, 10 placements a second whose expiresAt is
// valid RFC 3339 but past year 9999 in UTC, and among them admin markets with such a resolvesAt
// and candle queries with such a to, while the well-behaved client trades. Such an order once
// failed its whole shard batch (every order in it answered 503), and such a market emptied
// GET /markets for everyone. Now each is a 400 naming its field, none of the well-behaved
// client's placements is refused or slowed past the bound, and GET /markets answers a list.
func TestAbuseTimes(t *testing.T) {
	r := newAbuseRig(t)
	farOrder := fmt.Sprintf(`{"marketId":%q,"side":"BUY","outcome":"YES","price":5,"quantity":1,"timeInForce":"GTD","expiresAt":%q}`, r.market, farTime)
	farMarket := fmt.Sprintf(`{"question":"Far?","category":"c","resolvesAt":%q}`, farTime)
	farCandles := fmt.Sprintf("/api/v1/market/candles?marketId=%s&interval=1m&to=%s", r.market, url.QueryEscape(farTime))

	var mu sync.Mutex
	answers := map[string]int{} // "what: status code field" → how many
	send := func(what, method, path, token, body string) {
		req, _ := http.NewRequest(method, r.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		key := what + ": "
		if resp, err := r.attacker.Do(req); err != nil {
			key += err.Error()
		} else {
			var e ErrorBody
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = json.Unmarshal(raw, &e)
			key += fmt.Sprintf("%d %s %s", resp.StatusCode, e.Details.Code, e.Details.Field)
		}
		mu.Lock()
		answers[key]++
		mu.Unlock()
	}

	g := r.tradeDuring(t)
	tick := time.NewTicker(abuseFarPace)
	n := 0
	hammer(1, abuseFarTime, func(int) bool {
		<-tick.C
		switch n++; n % 10 {
		case 3:
			send("market", "POST", "/admin/v1/markets", abuseAdminToken, farMarket)
		case 7:
			send("candles", "GET", farCandles, r.abuser.Key, "")
		default:
			send("order", "POST", "/api/v1/order", r.abuser.Key, farOrder)
		}
		return true
	})
	tick.Stop()
	g.finish(t, "far times", abuseMaxPlacement)

	want := map[string]bool{"order: 400 out_of_range expiresAt": true, "market: 400 out_of_range resolvesAt": true,
		"candles: 400 out_of_range to": true}
	for answer, n := range answers {
		if !want[answer] {
			t.Errorf("%d far-time requests answered %s", n, answer)
		}
	}
	t.Logf("far-time requests: %v", answers)

	var list struct {
		Markets []json.RawMessage `json:"markets"`
	}
	r.good.Expect(t, "GET", "/markets", nil, http.StatusOK, &list)
	if len(list.Markets) == 0 {
		t.Error("GET /markets lists no market after the attack")
	}
}
