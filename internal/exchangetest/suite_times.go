package exchangetest

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/apiserver"
)

// farTime is valid RFC 3339, but in year 10000 once in UTC: no JSON answer or event can carry it.
const farTime = "9999-12-31T23:59:59-23:59"

// testFarTimes sends times past year 9999 in UTC in every field that takes a time: each is a 400
// naming its field, and another account's orders placed meanwhile are not failed with it (such an
// order once failed its whole shard batch, every order in it answered 503).
func testFarTimes(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	far, good := tg.NewAccount(t, "far"), tg.NewAccount(t, "far")
	farOrder := func() map[string]any {
		return withFields(OrderBody(m.ID, "BUY", "YES", 30, 1), map[string]any{"timeInForce": "GTD", "expiresAt": farTime})
	}
	if e := far.ExpectError(t, "POST", "/order", farOrder(), http.StatusBadRequest, "out_of_range"); e.Details.Field != "expiresAt" {
		t.Errorf("a far expiry refused naming %q, want expiresAt", e.Details.Field)
	}
	last := placeWith(t, far, m.ID, "BUY", "YES", 30, 1, map[string]any{"timeInForce": "GTD", "expiresAt": "9999-12-31T23:59:59Z"}, http.StatusCreated)
	if want := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC); last.ExpiresAt == nil || !last.ExpiresAt.Equal(want) {
		t.Errorf("an expiry at the end of year 9999: %v", last.ExpiresAt)
	}

	// In a batch, the far placement alone is refused.
	var batch struct{ Results []apiserver.BatchResult }
	far.Expect(t, "POST", "/orders/batch", map[string]any{"orders": []any{farOrder(), OrderBody(m.ID, "BUY", "YES", 31, 1)}}, http.StatusCreated, &batch)
	if r := batch.Results; len(r) != 2 || r[0].Status != http.StatusBadRequest || r[0].Details == nil ||
		r[0].Details.Code != "out_of_range" || r[0].Details.Field != "expiresAt" || r[1].Status != http.StatusCreated {
		t.Errorf("a batch of a far placement and a good one: %+v", r)
	}

	// Far placements racing another account's: each of the other's is placed.
	const rounds = 20
	farStatus, goodStatus := make([]int, rounds), make([]int, rounds)
	var wg sync.WaitGroup
	for i := range rounds {
		wg.Go(func() { farStatus[i], _, _ = post(tg, far, farOrder()) })
		wg.Go(func() {
			goodStatus[i], _, _ = post(tg, good, withFields(OrderBody(m.ID, "BUY", "NO", 20, 1), map[string]any{"timeInForce": "IOC"}))
		})
	}
	wg.Wait()
	for i := range rounds {
		if farStatus[i] != http.StatusBadRequest || goodStatus[i] != http.StatusCreated {
			t.Fatalf("far placements answered %v; the other account's, placed meanwhile, %v (want every one 400 and 201)", farStatus, goodStatus)
		}
	}

	id := m.ID.String()
	for _, field := range []string{"to", "from"} {
		q := "marketId=" + id + "&interval=1m&" + field + "=" + url.QueryEscape(farTime)
		if e := good.ExpectError(t, "GET", "/market/candles?"+q, nil, http.StatusBadRequest, "out_of_range"); e.Details.Field != field {
			t.Errorf("candles with a far %s refused naming %q", field, e.Details.Field)
		}
	}

	if tg.AdminMarkets {
		for _, field := range []string{"closesAt", "resolvesAt"} {
			var e ErrorBody
			tg.Admin(t, "POST", "/admin/v1/markets", map[string]any{"question": "Far?", "category": "c", field: farTime}, http.StatusBadRequest, &e)
			if e.Details.Code != "out_of_range" || e.Details.Field != field || e.Error == "" {
				t.Errorf("a market with a far %s: %+v", field, e)
			}
		}
	}
	var list struct{ Markets []apiserver.Market }
	good.Expect(t, "GET", "/markets", nil, http.StatusOK, &list)
	if len(list.Markets) == 0 {
		t.Error("GET /markets lists no market")
	}
}
