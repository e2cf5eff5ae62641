package exchangetest

import (
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// testOrderGroupsAcrossShards rests one order group's orders in two markets owned by different
// shards and has takers fill them concurrently in both, through both api replicas, in placements of
// at most `each` shares. The bound (docs/architecture.md §3, "Order groups"): the shards count the
// group's fills one batch after another, each from the exact count before it, and the placement
// that reaches the limit is the last to fill the group anywhere; so the group's fills end between
// fillLimit and fillLimit + each − 1, both orders are cancelled (ORDER_GROUP), the group refuses
// orders in both markets, and after a reset it takes them again.
func testOrderGroupsAcrossShards(t *testing.T, c *cluster) {
	tg := c.target(t, 0)
	markets := marketsOnTwoShards(t, c, tg)
	a, taker := tg.NewAccount(t, "groups-shards"), tg.NewAccount(t, "groups-shards")
	const limit, each, perMarket = 40, 3, 20 // 2 × 20 placements of 3 against a limit of 40
	g := newOrderGroup(t, a, limit, 3600)
	var resting []uuid.UUID
	for _, m := range markets {
		var o apiserver.PlacedOrder
		a.Expect(t, "POST", "/order", inGroup(OrderBody(m.ID, "BUY", "YES", 40, 100), g.ID), http.StatusCreated, &o)
		resting = append(resting, o.ID)
	}
	takers := []*Client{taker, {T: c.target(t, 1), Key: taker.Key, Account: taker.Account, Name: taker.Name}}

	var wg sync.WaitGroup
	var mu sync.Mutex
	filled := int64(0)
	for i, m := range markets {
		wg.Add(1)
		go func(cl *Client, market uuid.UUID) {
			defer wg.Done()
			for range perMarket {
				var o apiserver.PlacedOrder
				cl.Expect(t, "POST", "/order", withFields(OrderBody(market, "BUY", "NO", 60, each), map[string]any{"timeInForce": "IOC"}),
					http.StatusCreated, &o)
				mu.Lock()
				filled += o.FilledQuantity
				mu.Unlock()
			}
		}(takers[i], m.ID)
	}
	wg.Wait()
	t.Logf("the group's orders filled %d shares of a limit of %d, in placements of %d across two shards", filled, limit, each)
	if filled < limit || filled > limit+each-1 {
		t.Errorf("the group's orders filled %d shares, want from its limit %d to %d (the bound)", filled, limit, limit+each-1)
	}
	got := orderGroup(t, a, g.ID)
	if !got.Triggered || got.FilledInWindow != filled {
		t.Errorf("the group after the fills: %+v, want triggered with %d filled", got, filled)
	}
	for _, id := range resting {
		waitGroupCancelled(t, a, id)
	}
	for _, m := range markets {
		a.ExpectError(t, "POST", "/order", inGroup(OrderBody(m.ID, "BUY", "YES", 40, 1), g.ID), http.StatusConflict, "order_group_triggered")
	}
	a.Expect(t, "POST", "/order-groups/"+g.ID.String()+"/reset", nil, http.StatusOK, nil)
	for i, m := range markets {
		var o apiserver.PlacedOrder
		a.Expect(t, "POST", "/order", inGroup(OrderBody(m.ID, "BUY", "YES", 40, 2), g.ID), http.StatusCreated, &o)
		takers[i].Place(t, m.ID, "BUY", "NO", 60, 1)
	}
	if got := orderGroup(t, a, g.ID); got.Triggered || got.FilledInWindow != 2 {
		t.Errorf("the group after its reset and a fill in each market: %+v", got)
	}
	CheckInvariants(t, tg)
}
