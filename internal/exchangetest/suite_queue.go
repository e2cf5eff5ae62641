package exchangetest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// queuePositions is GET /orders/queue-positions's answer.
type queuePositions struct {
	Positions []apiserver.QueuePosition `json:"positions"`
	Errors    []struct {
		OrderID uuid.UUID `json:"orderId"`
		Error   string    `json:"error"`
		Details struct {
			Code  string `json:"code"`
			Field string `json:"field"`
		} `json:"details"`
	} `json:"errors"`
}

// testQueuePositions: three bids at one price from two accounts stand 0, q1 and q1+q2 deep; a
// fill of the first moves the others up; a NO order answers in its own terms beside the YES asks
// of its level; another account's order, a filled one, a cancelled one and an unknown one are
// refused, one by one and in a batch.
func testQueuePositions(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b, c := tg.NewAccount(t, "queue"), tg.NewAccount(t, "queue"), tg.NewAccount(t, "queue")
	first := a.Place(t, m.ID, "BUY", "YES", 40, 5)
	second := b.Place(t, m.ID, "BUY", "YES", 40, 3)
	third := a.Place(t, m.ID, "BUY", "YES", 40, 7)
	a.Place(t, m.ID, "BUY", "YES", 39, 9) // another level, which counts for nothing
	expect := func(who *Client, id uuid.UUID, side, outcome string, price int, ahead, level int64) {
		t.Helper()
		var got apiserver.QueuePosition
		who.Expect(t, "GET", "/order/queue-position?orderId="+id.String(), nil, http.StatusOK, &got)
		want := apiserver.QueuePosition{OrderID: id, MarketID: m.ID, Side: side, Outcome: outcome, Price: price,
			AheadQuantity: ahead, LevelQuantity: level}
		if got != want {
			t.Fatalf("queue position %+v, want %+v", got, want)
		}
	}
	expect(a, first.ID, "BUY", "YES", 40, 0, 15)
	expect(b, second.ID, "BUY", "YES", 40, 5, 15)
	expect(a, third.ID, "BUY", "YES", 40, 8, 15)

	// A BUY NO at 55 rests as a YES ask at 45, and answers in its own terms; a second joins the
	// same level behind it.
	no := b.Place(t, m.ID, "BUY", "NO", 55, 4)
	no2 := c.Place(t, m.ID, "BUY", "NO", 55, 2)
	expect(b, no.ID, "BUY", "NO", 55, 0, 6)
	expect(c, no2.ID, "BUY", "NO", 55, 4, 6)

	// A taker fills the first bid whole: the others move up.
	c.Place(t, m.ID, "BUY", "NO", 60, 5)
	expect(b, second.ID, "BUY", "YES", 40, 0, 10)
	expect(a, third.ID, "BUY", "YES", 40, 3, 10)
	c.Place(t, m.ID, "BUY", "NO", 60, 1) // and one share of the second
	expect(a, third.ID, "BUY", "YES", 40, 2, 9)

	// Refusals, one by one.
	a.ExpectError(t, "GET", "/order/queue-position?orderId="+second.ID.String(), nil, http.StatusForbidden, "not_your_order")
	e := a.ExpectError(t, "GET", "/order/queue-position?orderId="+first.ID.String(), nil, http.StatusConflict, "order_not_open")
	if !strings.HasPrefix(e.Error, "the order is FILLED: ") || e.Details.Field != "orderId" {
		t.Fatalf("a filled order's refusal: %+v", e)
	}
	a.ExpectError(t, "GET", "/order/queue-position?orderId="+uuid.NewString(), nil, http.StatusNotFound, "order_not_found")
	a.ExpectError(t, "GET", "/order/queue-position?orderId=nope", nil, http.StatusBadRequest, "invalid_uuid")
	a.ExpectError(t, "GET", "/order/queue-position", nil, http.StatusBadRequest, "missing_field")
	c.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": no2.ID}, http.StatusOK, nil)
	e = c.ExpectError(t, "GET", "/order/queue-position?orderId="+no2.ID.String(), nil, http.StatusConflict, "order_not_open")
	if !strings.HasPrefix(e.Error, "the order is CANCELLED: ") {
		t.Fatalf("a cancelled order's refusal: %+v", e)
	}

	// In a batch: the positions in the order asked, each refusal with its order.
	unknown := uuid.New()
	var got queuePositions
	a.Expect(t, "GET", "/orders/queue-positions?orderIds="+strings.Join([]string{first.ID.String(), third.ID.String(),
		unknown.String(), second.ID.String()}, ","), nil, http.StatusOK, &got)
	if len(got.Positions) != 1 || got.Positions[0].OrderID != third.ID || got.Positions[0].AheadQuantity != 2 || got.Positions[0].LevelQuantity != 9 {
		t.Fatalf("batch positions %+v", got.Positions)
	}
	codes := map[uuid.UUID]string{}
	for _, e := range got.Errors {
		codes[e.OrderID] = e.Details.Code
	}
	if want := map[uuid.UUID]string{first.ID: "order_not_open", unknown: "order_not_found", second.ID: "not_your_order"}; len(codes) != 3 ||
		codes[first.ID] != want[first.ID] || codes[unknown] != want[unknown] || codes[second.ID] != want[second.ID] {
		t.Fatalf("batch errors %+v, want %v", got.Errors, want)
	}
	b.Expect(t, "GET", "/orders/queue-positions?orderIds="+second.ID.String()+","+no.ID.String(), nil, http.StatusOK, &got)
	if len(got.Positions) != 2 || len(got.Errors) != 0 || got.Positions[0].OrderID != second.ID || got.Positions[1].OrderID != no.ID ||
		got.Positions[1].Outcome != "NO" || got.Positions[1].LevelQuantity != 4 {
		t.Fatalf("batch %+v", got)
	}
	for _, q := range []string{"", "?orderIds=", "?orderIds=nope", "?orderIds=" + third.ID.String() + "," + third.ID.String(),
		"?orderIds=" + strings.Repeat(uuid.NewString()+",", 100) + uuid.NewString()} {
		var e ErrorBody
		a.Expect(t, "GET", "/orders/queue-positions"+q, nil, http.StatusBadRequest, &e)
		if e.Details.Field != "orderIds" || e.Details.Code == "" {
			t.Fatalf("GET /orders/queue-positions%.60s: %+v, want a refusal naming orderIds", q, e)
		}
	}
}
