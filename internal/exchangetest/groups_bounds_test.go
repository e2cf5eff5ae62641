package exchangetest

import (
	"net/http"
	"sync"
	"testing"

	"github.com/pmx-dev/pmx/apiserver"
)

// groupsCap is the most order groups an account keeps on TestOrderGroupCap's exchange.
const groupsCap = 3

// TestOrderGroupCap: an account keeps at most MaxOrderGroups groups. Requests for more, made at
// once, make exactly as many as the cap lets; the rest are refused with 409 too_many_order_groups
// and make nothing; another account is not held back by it.
func TestOrderGroupCap(t *testing.T) {
	tg := StartDev(t, func(c *apiserver.Config) { c.MaxOrderGroups = groupsCap })
	a, b := tg.NewAccount(t, "groups-cap"), tg.NewAccount(t, "groups-cap")
	newOrderGroup(t, a, 5, 60)
	const tries = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	made, refused := 0, 0
	for range tries {
		wg.Go(func() {
			status, raw := a.Do(t, "POST", "/order-groups", map[string]any{"fillLimit": 5, "windowSeconds": 60})
			mu.Lock()
			defer mu.Unlock()
			switch status {
			case http.StatusCreated:
				made++
			case http.StatusConflict:
				refused++
			default:
				t.Errorf("POST /order-groups at the cap: %d %s", status, raw)
			}
		})
	}
	wg.Wait()
	if made != groupsCap-1 || refused != tries-(groupsCap-1) {
		t.Errorf("%d requests for groups beside one made: %d made, %d refused; want %d made", tries, made, refused, groupsCap-1)
	}
	var groups []apiserver.OrderGroup
	a.Expect(t, "GET", "/order-groups", nil, http.StatusOK, &groups)
	if len(groups) != groupsCap {
		t.Errorf("the account keeps %d groups, want the cap %d", len(groups), groupsCap)
	}
	e := a.ExpectError(t, "POST", "/order-groups", map[string]any{"fillLimit": 5, "windowSeconds": 60}, http.StatusConflict, "too_many_order_groups")
	if e.Error == "" {
		t.Errorf("too_many_order_groups without a message")
	}
	a.Expect(t, "GET", "/order-groups", nil, http.StatusOK, &groups)
	if len(groups) != groupsCap {
		t.Errorf("a refused group changed the account's: %d groups, want %d", len(groups), groupsCap)
	}
	newOrderGroup(t, b, 5, 60) // another account's cap is its own
}
