package exchangetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/poll"
)

// Order groups (POST, GET /order-groups, GET /order-groups/{id}, POST /order-groups/{id}/reset;
// internal/shard/groups.go): the bounds of a group, who may see and reset it, a trigger in one
// market by fills in another, what each refusal looks like, the cancels on the account's feed, and
// a reset. testOrderGroupsAcrossShards (distributed mode) checks the bound across two shards.

// groupCancelWait bounds how long a triggered group's orders may rest in a market of another
// shard than the one that triggered it: the shards' group sweep runs every second.
const groupCancelWait = 15 * time.Second

// newOrderGroup makes a group of c's.
func newOrderGroup(t *testing.T, c *Client, fillLimit, windowSeconds int) apiserver.OrderGroup {
	t.Helper()
	var g apiserver.OrderGroup
	c.Expect(t, "POST", "/order-groups", map[string]any{"fillLimit": fillLimit, "windowSeconds": windowSeconds}, http.StatusCreated, &g)
	return g
}

// orderGroup reads a group of c's.
func orderGroup(t *testing.T, c *Client, id uuid.UUID) apiserver.OrderGroup {
	t.Helper()
	var g apiserver.OrderGroup
	c.Expect(t, "GET", "/order-groups/"+id.String(), nil, http.StatusOK, &g)
	return g
}

// inGroup is a placement's body in group g.
func inGroup(body map[string]any, g uuid.UUID) map[string]any {
	return withFields(body, map[string]any{"orderGroupId": g.String()})
}

// orderOf reads one of c's orders.
func orderOf(t *testing.T, c *Client, id uuid.UUID) apiserver.Order {
	t.Helper()
	var o apiserver.Order
	c.Expect(t, "GET", "/order?orderId="+id.String(), nil, http.StatusOK, &o)
	return o
}

// waitGroupCancelled waits until an order of c's is cancelled by its group's trigger.
func waitGroupCancelled(t *testing.T, c *Client, id uuid.UUID) apiserver.Order {
	t.Helper()
	var o apiserver.Order
	poll.Wait(t, groupCancelWait, fmt.Sprintf("order %s to be cancelled by its order group", id), func() bool {
		o = orderOf(t, c, id)
		return o.Status != "OPEN" && o.Status != "PARTIALLY_FILLED"
	})
	if o.CancelReason == nil || *o.CancelReason != "ORDER_GROUP" {
		t.Errorf("order %s left the book as %s, cancelReason %v, want ORDER_GROUP", id, o.Status, o.CancelReason)
	}
	return o
}

func testOrderGroups(t *testing.T, tg *Target) {
	m1, m2 := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "groups"), tg.NewAccount(t, "groups")

	// Refused groups make nothing.
	for _, bad := range []struct {
		body        string
		code, field string
	}{
		{`{"windowSeconds": 10}`, "missing_field", "fillLimit"},
		{`{"fillLimit": 10}`, "missing_field", "windowSeconds"},
		{`{"fillLimit": 0, "windowSeconds": 10}`, "out_of_range", "fillLimit"},
		{`{"fillLimit": 9007199254740992, "windowSeconds": 10}`, "out_of_range", "fillLimit"},
		{`{"fillLimit": 10, "windowSeconds": 0}`, "out_of_range", "windowSeconds"},
		{`{"fillLimit": 10, "windowSeconds": 86401}`, "out_of_range", "windowSeconds"},
		{`{"fillLimit": 1.5, "windowSeconds": 10}`, "not_an_integer", "fillLimit"},
		{`{"fillLimit": 10, "windowSeconds": "10"}`, "invalid_type", "windowSeconds"},
		{`{"fillLimit": 1, "fillLimit": 2, "windowSeconds": 10}`, "duplicate_key", "fillLimit"},
	} {
		e := a.ExpectError(t, "POST", "/order-groups", json.RawMessage(bad.body), http.StatusBadRequest, bad.code)
		if e.Details.Field != bad.field {
			t.Errorf("POST /order-groups %s: field %q, want %q", bad.body, e.Details.Field, bad.field)
		}
	}
	reader := tg.AddKey(t, a, auth.KeySpec{Scope: auth.ScopeRead})
	canceller := tg.AddKey(t, a, auth.KeySpec{Scope: auth.ScopeCancel})
	reader.ExpectError(t, "POST", "/order-groups", map[string]any{"fillLimit": 10, "windowSeconds": 60}, http.StatusForbidden, "insufficient_scope")
	canceller.ExpectError(t, "POST", "/order-groups", map[string]any{"fillLimit": 10, "windowSeconds": 60}, http.StatusForbidden, "insufficient_scope")
	var none []apiserver.OrderGroup
	reader.Expect(t, "GET", "/order-groups", nil, http.StatusOK, &none)
	if len(none) != 0 {
		t.Fatalf("refused requests made groups: %+v", none)
	}

	g := newOrderGroup(t, a, 10, 3600)
	if g.FillLimit != 10 || g.WindowSeconds != 3600 || g.FilledInWindow != 0 || g.Triggered || g.TriggeredAt != nil {
		t.Fatalf("POST /order-groups answered %+v", g)
	}
	if got := orderGroup(t, reader, g.ID); got.ID != g.ID || got.Triggered {
		t.Fatalf("GET /order-groups/%s: %+v", g.ID, got)
	}
	var listed []apiserver.OrderGroup
	a.Expect(t, "GET", "/order-groups", nil, http.StatusOK, &listed)
	if len(listed) != 1 || listed[0].ID != g.ID {
		t.Fatalf("GET /order-groups: %+v", listed)
	}

	// Another account's group is not found, as no group is.
	theirs := newOrderGroup(t, b, 5, 60)
	for _, id := range []uuid.UUID{uuid.New(), theirs.ID} {
		a.ExpectError(t, "GET", "/order-groups/"+id.String(), nil, http.StatusNotFound, "order_group_not_found")
		a.ExpectError(t, "POST", "/order-groups/"+id.String()+"/reset", nil, http.StatusNotFound, "order_group_not_found")
		e := a.ExpectError(t, "POST", "/order", inGroup(OrderBody(m1.ID, "BUY", "YES", 40, 1), id), http.StatusBadRequest, "order_group_not_found")
		if e.Details.Field != "orderGroupId" {
			t.Errorf("a placement into group %s: field %q, want orderGroupId", id, e.Details.Field)
		}
	}
	a.ExpectError(t, "GET", "/order-groups/nope", nil, http.StatusBadRequest, "invalid_uuid")
	a.ExpectError(t, "POST", "/order-groups/nope/reset", nil, http.StatusBadRequest, "invalid_uuid")
	a.ExpectError(t, "POST", "/order", withFields(OrderBody(m1.ID, "BUY", "YES", 40, 1), map[string]any{"orderGroupId": "nope"}),
		http.StatusBadRequest, "invalid_uuid")
	if o := a.Place(t, m1.ID, "BUY", "YES", 1, 1); o.OrderGroupID != nil { // in no group
		t.Errorf("an order placed in no group shows group %v", o.OrderGroupID)
	}

	// The group's orders rest in two markets; one order of a's rests in none.
	var in1, in2 apiserver.PlacedOrder
	a.Expect(t, "POST", "/order", inGroup(OrderBody(m1.ID, "BUY", "YES", 40, 8), g.ID), http.StatusCreated, &in1)
	a.Expect(t, "POST", "/order", inGroup(OrderBody(m2.ID, "BUY", "YES", 40, 20), g.ID), http.StatusCreated, &in2)
	free := a.Place(t, m2.ID, "BUY", "YES", 30, 5)
	if in1.OrderGroupID == nil || *in1.OrderGroupID != g.ID || in2.OrderGroupID == nil || *in2.OrderGroupID != g.ID {
		t.Fatalf("orders placed into group %s show %v and %v", g.ID, in1.OrderGroupID, in2.OrderGroupID)
	}
	// An amend keeps the order in its group; a batch places into one.
	var amended apiserver.PlacedOrder
	a.Expect(t, "POST", "/order/amend", map[string]any{"orderId": in1.ID, "price": 41}, http.StatusOK, &amended)
	if o := orderOf(t, a, in1.ID); o.OrderGroupID == nil || *o.OrderGroupID != g.ID || o.Price != 41 {
		t.Fatalf("the amended order: %+v", o)
	}
	var batch struct {
		Results []struct {
			Status int
			Order  *apiserver.Order
		}
	}
	a.Expect(t, "POST", "/orders/batch", map[string]any{"orders": []any{inGroup(OrderBody(m1.ID, "BUY", "YES", 2, 3), g.ID)}},
		http.StatusCreated, &batch)
	if len(batch.Results) != 1 || batch.Results[0].Order == nil || batch.Results[0].Order.OrderGroupID == nil {
		t.Fatalf("a batch placement into group %s: %+v", g.ID, batch.Results)
	}
	inBatch := batch.Results[0].Order.ID

	// Fills below the limit are counted, in the window.
	b.Place(t, m2.ID, "BUY", "NO", 60, 6) // meets in2: 6 of the group's
	if got := orderGroup(t, a, g.ID); got.FilledInWindow != 6 || got.Triggered {
		t.Fatalf("after 6 shares filled: %+v", got)
	}
	// The placement that reaches the limit completes: 11 of 10, the bound (less than it filled, 5).
	crossing := b.Place(t, m2.ID, "BUY", "NO", 60, 5)
	if crossing.FilledQuantity != 5 {
		t.Fatalf("the crossing placement filled %d of 5", crossing.FilledQuantity)
	}
	got := orderGroup(t, a, g.ID)
	if !got.Triggered || got.TriggeredAt == nil || got.FilledInWindow != 11 {
		t.Fatalf("after 11 shares filled of a limit of 10: %+v", got)
	}
	// Every resting order of the group is cancelled, in the market where it filled and in the other
	// (at once on the same shard, by the group sweep on another); the order in no group rests on.
	if o := waitGroupCancelled(t, a, in2.ID); o.FilledQuantity != 11 {
		t.Errorf("the group's order in %s: %+v", m2.ID, o)
	}
	waitGroupCancelled(t, a, in1.ID)
	waitGroupCancelled(t, a, inBatch)
	if o := orderOf(t, a, free.ID); o.Status != "OPEN" {
		t.Errorf("the order in no group: %+v, want it OPEN", o)
	}
	// The cancels are on the account's feed, with their reason.
	cancelled := map[uuid.UUID]bool{}
	for _, e := range a.accountEvents(t, feed.Cursor{}, 1000).Events {
		if e.Type == feed.AccountCancelled && e.Order != nil && e.Order.CancelReason != nil && *e.Order.CancelReason == "ORDER_GROUP" {
			cancelled[e.Order.ID] = true
		}
	}
	for _, id := range []uuid.UUID{in1.ID, in2.ID, inBatch} {
		if !cancelled[id] {
			t.Errorf("the account's feed has no ORDER_GROUP cancel of order %s", id)
		}
	}

	// A triggered group refuses orders, in every market, and nothing changes.
	before := riskState(t, a)
	for _, m := range []uuid.UUID{m1.ID, m2.ID} {
		e := a.ExpectError(t, "POST", "/order", inGroup(OrderBody(m, "BUY", "YES", 10, 1), g.ID), http.StatusConflict, "order_group_triggered")
		if e.Details.Field != "orderGroupId" {
			t.Errorf("refused into a triggered group: field %q", e.Details.Field)
		}
	}
	if after := riskState(t, a); after != before {
		t.Errorf("refusals by a triggered group changed the account: %s, was %s", after, before)
	}

	// Only a trade key resets it: a cancel key cannot let a bot trade again.
	canceller.ExpectError(t, "POST", "/order-groups/"+g.ID.String()+"/reset", nil, http.StatusForbidden, "insufficient_scope")
	var reset apiserver.OrderGroup
	a.Expect(t, "POST", "/order-groups/"+g.ID.String()+"/reset", nil, http.StatusOK, &reset)
	if reset.Triggered || reset.TriggeredAt != nil || reset.FilledInWindow != 0 {
		t.Fatalf("the group as reset: %+v", reset)
	}
	a.Place(t, m1.ID, "BUY", "YES", 40, 2) // in no group, ahead of the next
	var after apiserver.PlacedOrder
	a.Expect(t, "POST", "/order", inGroup(OrderBody(m1.ID, "BUY", "YES", 40, 2), g.ID), http.StatusCreated, &after)
	b.Place(t, m1.ID, "BUY", "NO", 60, 4) // meets again (no group) first, then after: 2 of 10
	if got := orderGroup(t, a, g.ID); got.FilledInWindow != 2 || got.Triggered {
		t.Fatalf("after the reset and 2 shares filled: %+v", got)
	}
	CheckInvariants(t, tg)

	// Pages: b's groups, three at a time, cover every one of them exactly once, newest first, as
	// the list without pages shows them.
	for range 6 {
		newOrderGroup(t, b, 5, 60)
	}
	var all []apiserver.OrderGroup
	b.Expect(t, "GET", "/order-groups", nil, http.StatusOK, &all)
	if len(all) != 7 {
		t.Fatalf("GET /order-groups of b's 7 groups: %d", len(all))
	}
	var paged []apiserver.OrderGroup
	path := "/order-groups?limit=3"
	for pages := 0; ; pages++ {
		if pages == 4 {
			t.Fatalf("GET /order-groups in pages of 3 of 7 groups: still a nextCursor after 4 pages")
		}
		var page orderGroupPage
		b.Expect(t, "GET", path, nil, http.StatusOK, &page)
		paged = append(paged, page.OrderGroups...)
		if page.NextCursor == nil {
			break
		}
		path = "/order-groups?limit=3&cursor=" + *page.NextCursor
	}
	if len(paged) != len(all) {
		t.Fatalf("the pages hold %d groups, the list %d", len(paged), len(all))
	}
	for i := range all {
		if paged[i].ID != all[i].ID {
			t.Fatalf("group %d: %s in the pages, %s in the list", i, paged[i].ID, all[i].ID)
		}
	}
	b.ExpectError(t, "GET", "/order-groups?cursor=nope", nil, http.StatusBadRequest, "invalid_cursor")
	b.ExpectError(t, "GET", "/order-groups?limit=0", nil, http.StatusBadRequest, "out_of_range")
	b.ExpectError(t, "GET", "/order-groups?limit=501", nil, http.StatusBadRequest, "out_of_range")

	// Deleting: a group an open order is in stays, nothing changed; without one it goes, and is
	// then found nowhere, by a placement naming it either. Another account's is not found.
	gPath := "/order-groups/" + g.ID.String()
	parked := a.Place(t, m2.ID, "BUY", "YES", 3, 1)
	var inG apiserver.PlacedOrder
	a.Expect(t, "POST", "/order", inGroup(OrderBody(m2.ID, "BUY", "YES", 3, 1), g.ID), http.StatusCreated, &inG)
	canceller.ExpectError(t, "DELETE", gPath, nil, http.StatusForbidden, "insufficient_scope")
	a.ExpectError(t, "DELETE", gPath, nil, http.StatusConflict, "order_group_has_open_orders")
	a.ExpectError(t, "DELETE", "/order-groups/nope", nil, http.StatusBadRequest, "invalid_uuid")
	a.ExpectError(t, "DELETE", "/order-groups/"+theirs.ID.String(), nil, http.StatusNotFound, "order_group_not_found")
	if got := orderGroup(t, a, g.ID); got.ID != g.ID || got.FilledInWindow != 2 {
		t.Fatalf("the group after refused deletes: %+v", got)
	}
	a.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": inG.ID}, http.StatusOK, nil)
	a.Expect(t, "DELETE", gPath, nil, http.StatusNoContent, nil)
	a.ExpectError(t, "GET", gPath, nil, http.StatusNotFound, "order_group_not_found")
	a.ExpectError(t, "DELETE", gPath, nil, http.StatusNotFound, "order_group_not_found")
	a.ExpectError(t, "POST", "/order", inGroup(OrderBody(m2.ID, "BUY", "YES", 3, 1), g.ID), http.StatusBadRequest, "order_group_not_found")
	var left []apiserver.OrderGroup
	a.Expect(t, "GET", "/order-groups", nil, http.StatusOK, &left)
	if len(left) != 0 {
		t.Fatalf("a's groups after deleting its only one: %+v", left)
	}
	if o := orderOf(t, a, parked.ID); o.Status != "OPEN" {
		t.Errorf("an order in no group after its account's group was deleted: %+v", o)
	}
	CheckInvariants(t, tg)
}

// orderGroupPage is GET /order-groups's answer with limit or cursor.
type orderGroupPage struct {
	OrderGroups []apiserver.OrderGroup `json:"orderGroups"`
	NextCursor  *string                `json:"nextCursor"`
}
