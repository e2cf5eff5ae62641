package exchangetest

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/poll"
)

func testCancelOrder(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "cancel"), tg.NewAccount(t, "cancel")
	open := a.Place(t, m.ID, "BUY", "YES", 30, 10)
	partial := a.Place(t, m.ID, "BUY", "YES", 40, 10)
	b.Place(t, m.ID, "BUY", "NO", 60, 4) // fills 4 of the bid at 40
	expectCash(t, a, Grant-300-400, 300+240)

	var got apiserver.Order
	a.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": open.ID}, http.StatusOK, &got)
	if got.ID != open.ID || got.Status != "CANCELLED" || got.FilledQuantity != 0 || got.Quantity != 10 || got.Price != 30 {
		t.Fatalf("cancelled %+v", got)
	}
	a.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": partial.ID}, http.StatusOK, &got)
	if got.Status != "PARTIALLY_FILLED_CANCELLED" || got.FilledQuantity != 4 {
		t.Fatalf("cancelled %+v", got)
	}
	expectCash(t, a, Grant-160, 0)

	expectNotOpen(t, a, open.ID, "CANCELLED")
	expectNotOpen(t, a, partial.ID, "PARTIALLY_FILLED_CANCELLED")
	other := b.Place(t, m.ID, "BUY", "NO", 10, 1)
	a.ExpectError(t, "POST", "/cancel-order", map[string]any{"orderId": other.ID}, http.StatusForbidden, "not_your_order")
	a.ExpectError(t, "POST", "/cancel-order", map[string]any{"orderId": uuid.NewString()}, http.StatusNotFound, "order_not_found")
	a.ExpectError(t, "POST", "/cancel-order", map[string]any{"orderId": "nope"}, http.StatusBadRequest, "invalid_uuid")
	a.ExpectError(t, "POST", "/cancel-order", `{"orderId":"`+other.ID.String()+`","orderId":"`+uuid.NewString()+`"}`, http.StatusBadRequest, "duplicate_key")
	a.ExpectError(t, "POST", "/cancel-order", map[string]any{}, http.StatusBadRequest, "missing_field")
	a.ExpectError(t, "POST", "/cancel-order", "{", http.StatusBadRequest, "malformed_json")
	var still apiserver.Order
	b.Expect(t, "GET", "/order?orderId="+other.ID.String(), nil, http.StatusOK, &still)
	if still.Status != "OPEN" {
		t.Fatalf("another account's refused cancel changed the order: %+v", still)
	}
	// An order filled after it rested, here by another account, can no longer be cancelled.
	filled := a.Place(t, m.ID, "BUY", "YES", 20, 2)
	b.Place(t, m.ID, "BUY", "NO", 80, 2)
	expectNotOpen(t, a, filled.ID, "FILLED")
	b.ExpectError(t, "POST", "/cancel-order", map[string]any{"orderId": filled.ID}, http.StatusForbidden, "not_your_order")
	// And one filled as it was placed.
	b.Place(t, m.ID, "BUY", "NO", 75, 1)
	taker := a.Place(t, m.ID, "BUY", "YES", 25, 1)
	if taker.Status != "FILLED" {
		t.Fatalf("taker %+v", taker)
	}
	expectNotOpen(t, a, taker.ID, "FILLED")
}

// expectNotOpen cancels an order that is no longer open and checks that the refusal names the
// order's status.
func expectNotOpen(t *testing.T, c *Client, id uuid.UUID, status string) {
	t.Helper()
	e := c.ExpectError(t, "POST", "/cancel-order", map[string]any{"orderId": id}, http.StatusBadRequest, "order_not_open")
	if want := "the order is " + status + ": "; !strings.HasPrefix(e.Error, want) || e.Details.Field != "orderId" {
		t.Fatalf("cancel of a %s order: %+v, want an error starting %q on orderId", status, e, want)
	}
}

func testCancelEverything(t *testing.T, tg *Target) {
	m1, m2 := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "everything"), tg.NewAccount(t, "everything")
	var none []apiserver.Order
	a.Expect(t, "POST", "/cancel-everything", nil, http.StatusOK, &none)
	if none == nil || len(none) != 0 {
		t.Fatalf("cancel-everything with nothing open = %v, want []", none)
	}
	a.Place(t, m1.ID, "BUY", "YES", 60, 10)
	b.Place(t, m1.ID, "BUY", "NO", 40, 5) // mints 5: a holds 5 YES
	a.Place(t, m1.ID, "SELL", "YES", 90, 5)
	a.Place(t, m2.ID, "BUY", "NO", 20, 3)
	keep := b.Place(t, m2.ID, "BUY", "YES", 10, 1)
	var cancelled []apiserver.Order
	a.Expect(t, "POST", "/cancel-everything", "", http.StatusOK, &cancelled)
	statuses := map[string]int{}
	for _, o := range cancelled {
		statuses[o.Status]++
	}
	if len(cancelled) != 3 || statuses["PARTIALLY_FILLED_CANCELLED"] != 1 || statuses["CANCELLED"] != 2 {
		t.Fatalf("cancel-everything returned %+v", cancelled)
	}
	expectCash(t, a, Grant-300, 0)
	expectShares(t, a, m1.ID.String()+"/YES", 5, 0)
	var got apiserver.Order
	b.Expect(t, "GET", "/order?orderId="+keep.ID.String(), nil, http.StatusOK, &got)
	if got.Status != "OPEN" {
		t.Fatalf("another account's order was cancelled: %+v", got)
	}
	a.Expect(t, "POST", "/cancel-everything", "{}", http.StatusOK, &cancelled)
	if len(cancelled) != 0 {
		t.Fatalf("second cancel-everything cancelled %v", cancelled)
	}
}

func testPositions(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, map[string]any{"question": "Positions?"})
	a, b := tg.NewAccount(t, "positions"), tg.NewAccount(t, "positions")
	if len(a.Positions(t)) != 0 {
		t.Fatal("a new account holds positions")
	}
	a.Place(t, m.ID, "BUY", "YES", 50, 6)
	b.Place(t, m.ID, "BUY", "NO", 50, 6)
	a.Place(t, m.ID, "SELL", "YES", 70, 4)
	p := a.Positions(t)[m.ID.String()+"/YES"]
	if p.Quantity != 6 || p.LockedQuantity != 4 || p.MarketQuestion != "Positions?" || p.MarketStatus != "OPEN" || p.ID == uuid.Nil {
		t.Fatalf("position %+v", p)
	}
	a.ExpectError(t, "POST", "/order", OrderBody(m.ID, "SELL", "YES", 70, 3), http.StatusBadRequest, "insufficient_shares")
	b.Place(t, m.ID, "SELL", "NO", 30, 4) // burns 4 pairs against a's SELL YES at 70
	a.Place(t, m.ID, "SELL", "YES", 1, 2)
	b.Place(t, m.ID, "SELL", "NO", 99, 2) // a YES bid at 1: burns the last 2 pairs
	if got := a.Positions(t); len(got) != 0 {
		t.Fatalf("positions after selling everything: %+v", got)
	}
}

func testOwnOrders(t *testing.T, tg *Target) {
	m1, m2 := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "orders"), tg.NewAccount(t, "orders")
	var placed []apiserver.PlacedOrder
	for i := range 5 {
		placed = append(placed, a.Place(t, m1.ID, "BUY", "YES", 10+i, 1))
	}
	placed = append(placed, a.Place(t, m2.ID, "BUY", "YES", 10, 1))
	b.Place(t, m2.ID, "BUY", "NO", 90, 1) // fills the last one

	var page struct {
		Orders     []apiserver.Order
		NextCursor *string
	}
	var seen []uuid.UUID
	cursor := ""
	for {
		a.Expect(t, "GET", "/orders?limit=4"+cursor, nil, http.StatusOK, &page)
		for _, o := range page.Orders {
			seen = append(seen, o.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = "&cursor=" + *page.NextCursor
	}
	if len(seen) != 6 || seen[0] != placed[5].ID || seen[5] != placed[0].ID {
		t.Fatalf("paged through %v, want all six newest first", seen)
	}
	a.Expect(t, "GET", "/orders?status=FILLED", nil, http.StatusOK, &page)
	if len(page.Orders) != 1 || page.Orders[0].ID != placed[5].ID {
		t.Fatalf("status=FILLED gave %+v", page.Orders)
	}
	a.Expect(t, "GET", "/orders?marketId="+m1.ID.String()+"&status=OPEN", nil, http.StatusOK, &page)
	if len(page.Orders) != 5 {
		t.Fatalf("market filter gave %d orders", len(page.Orders))
	}
	a.ExpectError(t, "GET", "/orders?status=DONE", nil, http.StatusBadRequest, "invalid_value")
	a.ExpectError(t, "GET", "/orders?cursor=!!", nil, http.StatusBadRequest, "invalid_cursor")
	// Forged cursors (microseconds from the Unix epoch, a dot, an order id): one before Postgres's
	// first timestamptz (4714-11-24 BC) is refused like any invalid cursor, not failed on by the
	// database; the extremes it can hold are pages like any other.
	forged := func(micros int64) string {
		return "&cursor=" + base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%s", micros, uuid.New()))
	}
	for _, micros := range []int64{-210_866_803_200_000_001, math.MinInt64} {
		e := a.ExpectError(t, "GET", "/orders?limit=2"+forged(micros), nil, http.StatusBadRequest, "invalid_cursor")
		if e.Details.Field != "cursor" {
			t.Errorf("cursor at %d: field %q", micros, e.Details.Field)
		}
	}
	for micros, want := range map[int64]int{-210_866_803_200_000_000: 0, math.MaxInt64: 2} {
		a.Expect(t, "GET", "/orders?limit=2"+forged(micros), nil, http.StatusOK, &page)
		if len(page.Orders) != want {
			t.Errorf("cursor at %d: %d orders, want %d", micros, len(page.Orders), want)
		}
	}
	a.ExpectError(t, "GET", "/orders?marketId=x", nil, http.StatusBadRequest, "invalid_uuid")
	a.ExpectError(t, "GET", "/order?orderId="+placed[0].ID.String()[:8], nil, http.StatusBadRequest, "invalid_uuid")
	b.ExpectError(t, "GET", "/order?orderId="+placed[0].ID.String(), nil, http.StatusForbidden, "not_your_order")
	a.ExpectError(t, "GET", "/order?orderId="+uuid.NewString(), nil, http.StatusNotFound, "order_not_found")
}

func testLifecycle(t *testing.T, tg *Target) {
	a, b := tg.NewAccount(t, "life"), tg.NewAccount(t, "life")
	// Close cancels resting orders and releases their locks; reopen trades again.
	m := tg.NewMarket(t, nil)
	resting := a.Place(t, m.ID, "BUY", "YES", 60, 10)
	b.Place(t, m.ID, "BUY", "NO", 40, 4)
	aCash, _ := a.Balance(t)
	got := tg.Markets.Close(t, m.ID)
	if got.Status != "CLOSED" {
		t.Fatalf("closed market is %s", got.Status)
	}
	expectCash(t, a, aCash+360, 0)
	expectNotOpen(t, a, resting.ID, "PARTIALLY_FILLED_CANCELLED")
	if book := a.Book(t, m.ID); len(book.Yes.Bids) != 0 || *book.Yes.LastTradePrice != 60 {
		t.Fatalf("book of a closed market: %+v", book)
	}
	a.ExpectError(t, "POST", "/order", OrderBody(m.ID, "BUY", "YES", 50, 1), http.StatusBadRequest, "market_not_open")
	tg.Markets.Reopen(t, m.ID)
	resting = a.Place(t, m.ID, "BUY", "YES", 50, 2)

	// Resolve YES: every YES share pays 100, NO shares nothing, resting orders are cancelled.
	aCash, _ = a.Balance(t)
	bCash, _ := b.Balance(t)
	got = tg.Markets.Resolve(t, m.ID, "YES")
	if got.Status != "RESOLVED" || !got.Resolved || got.Outcome == nil || *got.Outcome != "YES" {
		t.Fatalf("resolved market: %+v", got)
	}
	expectCash(t, a, aCash+100+400, 0) // the bid at 50 ×2 released, 4 YES shares paid
	expectCash(t, b, bCash, 0)
	if len(a.Positions(t)) != 0 || len(b.Positions(t)) != 0 {
		t.Fatal("positions remain after resolution")
	}
	// Settlement happens once: a later look pays nothing more.
	expectCash(t, a, aCash+500, 0)
	expectNotOpen(t, a, resting.ID, "CANCELLED")

	// Cancel (void) from CLOSED: every share of either outcome pays 50.
	v := tg.NewMarket(t, nil)
	a.Place(t, v.ID, "BUY", "YES", 70, 3)
	b.Place(t, v.ID, "BUY", "NO", 30, 3)
	tg.Markets.Close(t, v.ID)
	aCash, _ = a.Balance(t)
	bCash, _ = b.Balance(t)
	got = tg.Markets.Cancel(t, v.ID)
	if got.Status != "CANCELED" || got.Resolved {
		t.Fatalf("cancelled market: %+v", got)
	}
	expectCash(t, a, aCash+150, 0)
	expectCash(t, b, bCash+150, 0)
	var markets struct{ Markets []apiserver.Market }
	a.Expect(t, "GET", "/markets?status=CANCELED", nil, http.StatusOK, &markets)
	a.Expect(t, "GET", "/markets?status=RESOLVED", nil, http.StatusOK, &markets)
	CheckInvariants(t, tg)
}

// testClosesOnTime creates a market that closes a moment from now and waits, by polling its
// status, until the lifecycle loop has closed it.
func testClosesOnTime(t *testing.T, tg *Target) {
	// Whole seconds: a Market resource's times have no fraction.
	closesAt := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second)
	m := tg.NewMarket(t, map[string]any{"closesAt": closesAt.Format(time.RFC3339Nano)})
	a := tg.NewAccount(t, "closing")
	order := a.Place(t, m.ID, "BUY", "YES", 50, 2)
	var status string
	closed := func(ctx context.Context) (bool, error) {
		st, err := tg.Store.Market(ctx, m.ID)
		status = string(st.Status)
		return st.Status == "CLOSED", err
	}
	if err := poll.Until(context.Background(), 20*time.Second, closed); err != nil {
		t.Fatalf("market still %s 20s after closesAt: %v", status, err)
	}
	if time.Now().Before(closesAt) {
		t.Fatalf("closed before closesAt")
	}
	var got apiserver.Order
	a.Expect(t, "GET", "/order?orderId="+order.ID.String(), nil, http.StatusOK, &got)
	if got.Status != "CANCELLED" {
		t.Fatalf("resting order after close: %s", got.Status)
	}
	expectCash(t, a, Grant, 0)
}
