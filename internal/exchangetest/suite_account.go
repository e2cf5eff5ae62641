package exchangetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/feed"
)

// accountEventsPage is GET /account/events's answer.
type accountEventsPage struct {
	Seq    int64 // the cursor as a number while the feed is the one stream ""
	Cursor string
	Events []feed.AccountEvent
}

// accountEvents reads every event of the client's account after the cursor after, in pages of
// limit, each page from the cursor the one before gave; each stream's events must follow on from
// the last of it.
func (c *Client) accountEvents(t testing.TB, after feed.Cursor, limit int) accountEventsPage {
	t.Helper()
	var all accountEventsPage
	at, cursor := after.Clone(), after.String()
	for range 1000 {
		var page accountEventsPage
		c.Expect(t, "GET", fmt.Sprintf("/account/events?after=%s&limit=%d", cursor, limit), nil, http.StatusOK, &page)
		all.Seq, all.Cursor, cursor = page.Seq, page.Cursor, page.Cursor
		if len(page.Events) > limit {
			t.Fatalf("after %s: %d events, more than the limit %d", cursor, len(page.Events), limit)
		}
		for _, e := range page.Events {
			if e.Seq != at[e.Stream]+1 {
				t.Fatalf("account event %d of stream %q follows %d: a gap or a repeat", e.Seq, e.Stream, at[e.Stream])
			}
			at[e.Stream] = e.Seq
			all.Events = append(all.Events, e)
		}
		if c, err := feed.ParseCursor(page.Cursor); err != nil || !c.Covers(at) {
			t.Fatalf("a page's cursor %q (%v) is before its events %v", page.Cursor, err, at)
		}
		if len(page.Events) == 0 {
			return all
		}
	}
	t.Fatal("the account's events did not end")
	return all
}

// testAccountEvents follows two accounts' private feeds through an order's life — accepted,
// amended, filled in part by the other account, cancelled — and the settlement of the market:
// each event, numbered gaplessly from 1, equals what the REST API shows (GET /order, /fills,
// /settlements); the orders channel delivers the same events live and on resume, and the fills
// channel the fills alone.
func testAccountEvents(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	maker, taker := tg.NewAccount(t, "acct-maker"), tg.NewAccount(t, "acct-taker")

	live := maker.DialFeed(t)
	defer live.Close()
	live.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "orders"})
	if ack := live.ExpectReply(t, "subscribed", ""); ack.Seq != 0 || ack.Cursor != "v2." {
		t.Fatalf("a new account's feed is at seq %d, cursor %q", ack.Seq, ack.Cursor)
	}
	fills := taker.DialFeed(t)
	defer fills.Close()
	fills.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "fills"})
	fills.ExpectReply(t, "subscribed", "")

	body := OrderBody(m.ID, "BUY", "YES", 40, 5)
	body["clientOrderId"] = "life-1"
	var placed apiserver.PlacedOrder
	maker.Expect(t, "POST", "/order", body, http.StatusCreated, &placed)
	var amended apiserver.Order
	maker.Expect(t, "POST", "/order/amend", map[string]any{"orderId": placed.ID, "price": 45}, http.StatusOK, &amended)
	hit := taker.Place(t, m.ID, "BUY", "NO", 55, 3) // a YES ask at 45: 3 trade at 45
	if len(hit.Trades) != 1 {
		t.Fatalf("the taker's order made %d trades", len(hit.Trades))
	}
	var cancelled apiserver.Order
	maker.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": placed.ID}, http.StatusOK, &cancelled)
	tg.Markets.Resolve(t, m.ID, "YES")

	// The maker's feed: accepted, amended, its fill, cancelled, settled, as the REST API shows them.
	got := maker.accountEvents(t, feed.Cursor{}, 2)
	types := []string{}
	for _, e := range got.Events {
		types = append(types, e.Type)
	}
	if want := []string{"accepted", "amended", "fill", "cancelled", "settled"}; !reflect.DeepEqual(types, want) || got.Events[4].Seq != 5 ||
		got.Cursor != (feed.Cursor{got.Events[0].Stream: 5}).String() {
		t.Fatalf("the maker's events are %v up to %q, want %v up to 5 in one stream", types, got.Cursor, want)
	}
	ev := got.Events
	if o := ev[0].Order; o == nil || o.ID != placed.ID || o.Status != "OPEN" || o.FilledQuantity != 0 || o.Price != 40 ||
		o.ClientOrderID == nil || *o.ClientOrderID != "life-1" || !o.CreatedAt.Equal(placed.CreatedAt) {
		t.Errorf("accepted: %+v, placed %+v", ev[0].Order, placed.Order)
	}
	if o := ev[1].Order; o == nil || o.Price != 45 || o.Quantity != 5 || o.FilledQuantity != 0 || o.Status != "OPEN" {
		t.Errorf("amended: %+v", ev[1].Order)
	}
	var makerFills, takerFills fillsPage
	maker.Expect(t, "GET", "/fills", nil, http.StatusOK, &makerFills)
	taker.Expect(t, "GET", "/fills", nil, http.StatusOK, &takerFills)
	if len(makerFills.Fills) != 1 || ev[2].Fill == nil || !sameFill(*ev[2].Fill, makerFills.Fills[0]) {
		t.Errorf("the maker's fill event %+v; GET /fills %+v", ev[2].Fill, makerFills.Fills)
	}
	if e := ev[2]; e.Order != nil || e.FilledQuantity != 3 || e.Status != "PARTIALLY_FILLED" {
		t.Errorf("the order after its fill: %+v", e)
	}
	var final apiserver.Order
	maker.Expect(t, "GET", "/order?orderId="+placed.ID.String(), nil, http.StatusOK, &final)
	if o := ev[3].Order; o == nil || !sameOrder(*o, final) || !sameOrder(cancelled, final) {
		t.Errorf("cancelled: %+v; GET /order %+v", ev[3].Order, final)
	}
	var settlements struct{ Settlements []apiserver.Settlement }
	maker.Expect(t, "GET", "/settlements", nil, http.StatusOK, &settlements)
	if s := ev[4].Settlement; s == nil || len(settlements.Settlements) != 1 || !sameSettlement(*s, settlements.Settlements[0]) || s.Payout != 300 {
		t.Errorf("settled: %+v; GET /settlements %+v", ev[4].Settlement, settlements.Settlements)
	}

	// The taker's: its order accepted and filled at once, and its NO shares settled at nothing.
	tk := taker.accountEvents(t, feed.Cursor{}, 1000)
	if len(tk.Events) != 3 || tk.Events[0].Type != "accepted" || tk.Events[1].Type != "fill" || tk.Events[2].Type != "settled" {
		t.Fatalf("the taker's events: %+v", tk.Events)
	}
	if f := tk.Events[1]; f.Fill == nil || len(takerFills.Fills) != 1 || !sameFill(*f.Fill, takerFills.Fills[0]) ||
		f.Status != "FILLED" || f.FilledQuantity != 3 {
		t.Errorf("the taker's fill event %+v; GET /fills %+v", f, takerFills.Fills)
	}
	if s := tk.Events[2].Settlement; s == nil || s.Outcome != "NO" || s.Quantity != 3 || s.Payout != 0 {
		t.Errorf("the taker's settlement: %+v", s)
	}

	// Live: the orders channel delivered the same events; the fills channel the taker's fill.
	var streamed []feed.AccountEvent
	for len(streamed) < len(got.Events) {
		msg := live.Next(t, 30*time.Second)
		if msg.Type != "accountEvents" || msg.Channel != "orders" {
			t.Fatalf("on the orders channel: %s", msg.Raw)
		}
		streamed = append(streamed, msg.AccountEvents...)
	}
	if !sameAccountEvents(streamed, got.Events) {
		t.Errorf("the orders channel delivered %+v, GET /account/events %+v", streamed, got.Events)
	}
	if msg := fills.Next(t, 30*time.Second); msg.Type != "accountEvents" || len(msg.AccountEvents) != 1 ||
		!sameAccountEvents(msg.AccountEvents, tk.Events[1:2]) {
		t.Errorf("the fills channel delivered %s, want the taker's fill %+v", msg.Raw, tk.Events[1])
	}

	// Resume: from the cursor after the second event, the events after it, then live. The
	// market's shard wrote them all, in its own stream.
	own := got.Events[0].Stream
	second := feed.Cursor{own: 2}.String()
	again := maker.DialFeed(t)
	defer again.Close()
	again.Send(t, map[string]any{"op": "subscribe", "id": 2, "channel": "orders", "resumeFrom": second})
	if ack := again.ExpectReply(t, "subscribed", ""); ack.Cursor != second {
		t.Errorf("a resume from %s is acknowledged at %q", second, ack.Cursor)
	}
	replayed := again.Next(t, 30*time.Second)
	if !sameAccountEvents(replayed.AccountEvents, got.Events[2:]) || replayed.Cursor != got.Cursor {
		t.Errorf("resumed from 2: %+v to %q, want %+v to %q", replayed.AccountEvents, replayed.Cursor, got.Events[2:], got.Cursor)
	}
	nm := tg.NewMarket(t, nil)
	next := maker.Place(t, nm.ID, "BUY", "NO", 30, 1)
	// The new market may be on another shard, whose stream starts at 1.
	if msg := again.Next(t, 30*time.Second); len(msg.AccountEvents) != 1 || msg.AccountEvents[0].Order == nil ||
		msg.AccountEvents[0].Order.ID != next.ID || msg.AccountEvents[0].Seq != map[bool]int64{true: 6, false: 1}[msg.AccountEvents[0].Stream == own] {
		t.Errorf("after the resume, live: %s", msg.Raw)
	}

	// The feed's first form, a seq: 0 is the start, any other is refused with how to resume.
	again.Send(t, map[string]any{"op": "subscribe", "id": 3, "channel": "fills", "resumeFrom": 2})
	if reply := again.ExpectReply(t, "error", "outdated_cursor"); !strings.Contains(reply.Message, "cursor") {
		t.Errorf("outdated_cursor says %q", reply.Message)
	}
	maker.ExpectError(t, "GET", "/account/events?after=2", nil, http.StatusBadRequest, "outdated_cursor")
	if page := maker.accountEvents(t, feed.Cursor{}, 1000); len(page.Events) != 6 {
		t.Errorf("after=0: %d events, want 6", len(page.Events))
	}

	// Refusals: nothing changes.
	again.Send(t, map[string]any{"op": "subscribe", "id": 3, "channel": "fills", "resumeFrom": feed.Cursor{own: 100}.String()})
	again.ExpectReply(t, "error", "invalid_resume_from")
	again.Send(t, map[string]any{"op": "subscribe", "id": 3, "channel": "fills", "resumeFrom": "v2.x"})
	again.ExpectReply(t, "error", "invalid_resume_from")
	again.Send(t, map[string]any{"op": "subscribe", "id": 4, "channel": "fills", "marketId": m.ID})
	again.ExpectReply(t, "error", "invalid_message")
	again.Send(t, map[string]any{"op": "subscribe", "id": 5, "channel": "orders"})
	again.ExpectReply(t, "error", "already_subscribed")
	maker.ExpectError(t, "GET", "/account/events?after=-1", nil, http.StatusBadRequest, "invalid_cursor")
	maker.ExpectError(t, "GET", "/account/events?limit=1001", nil, http.StatusBadRequest, "out_of_range")
	end := maker.accountEvents(t, feed.Cursor{}, 1000).Cursor
	last, err := feed.ParseCursor(end)
	if err != nil {
		t.Fatal(err)
	}
	if page := maker.accountEvents(t, last, 10); len(page.Events) != 0 || page.Cursor != end {
		t.Errorf("after the last event: %+v", page)
	}
	beyond := last.Clone()
	beyond[own]++
	maker.ExpectError(t, "GET", "/account/events?after="+beyond.String(), nil, http.StatusBadRequest, "out_of_range")
	maker.ExpectError(t, "GET", "/account/events?after="+feed.Cursor{"shard-x": 1}.String(), nil, http.StatusBadRequest, "out_of_range")
	var account apiserver.Account
	maker.Expect(t, "GET", "/account", nil, http.StatusOK, &account)
	if _, err := tg.Store.Pool.Exec(context.Background(),
		`delete from account_events where account_id = (select id from accounts where uid = $1) and holder = $2 and first_seq = 1`,
		account.ID, own); err != nil {
		t.Fatal(err)
	}
	maker.ExpectError(t, "GET", "/account/events?after=0", nil, http.StatusGone, "resync_required")
	// Without after, the page starts at the oldest event kept.
	var oldest accountEventsPage
	maker.Expect(t, "GET", "/account/events", nil, http.StatusOK, &oldest)
	if len(oldest.Events) != 5 || oldest.Events[0].Seq != 2 {
		t.Errorf("without after, once the first event is gone: %+v", oldest.Events)
	}
	again.Send(t, map[string]any{"op": "subscribe", "id": 6, "channel": "fills", "resumeFrom": 0})
	again.ExpectReply(t, "error", "resync_required")
}

// testAccountStreams reads and follows an account's feed of two streams over HTTP and the
// WebSocket: the stream of the shard the market is on (own) and one of holder shard-x, written
// into Postgres as a shard does (its rows, numbered by its allocation), between two placements.
// The orders channel delivers shard-x's events live (the sweep finds them) and each message's cursor follows on; GET
// /account/events a page at a time merges the streams in commit order, each stream gapless; and
// resuming the WebSocket from every cursor the pages gave replays each later event once, as the
// pages have them.
func testAccountStreams(t *testing.T, tg *Target) {
	ctx := context.Background()
	m := tg.NewMarket(t, nil)
	c := tg.NewAccount(t, "acct-streams")
	c.Place(t, m.ID, "BUY", "YES", 10, 1)
	first := c.accountEvents(t, feed.Cursor{}, 1000)
	if len(first.Events) != 1 || first.Events[0].Stream == "shard-x" || first.Cursor != (feed.Cursor{first.Events[0].Stream: 1}).String() {
		t.Fatalf("the first placement's events: %+v", first)
	}
	own := first.Events[0].Stream
	live := c.DialFeed(t)
	defer live.Close()
	live.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "orders"})
	if ack := live.ExpectReply(t, "subscribed", ""); ack.Cursor != first.Cursor {
		t.Fatalf("subscribed at %q, want %q", ack.Cursor, first.Cursor)
	}

	// shard-x's stream: two batches, of three events, as its batches will write them.
	var account apiserver.Account
	c.Expect(t, "GET", "/account", nil, http.StatusOK, &account)
	o := first.Events[0]
	for _, b := range [][2]int64{{1, 2}, {3, 3}} {
		var evs []feed.AccountEvent
		for range b[1] - b[0] + 1 {
			evs = append(evs, feed.AccountEvent{Type: feed.AccountAccepted, Order: o.Order, At: o.At})
		}
		raw, err := feed.EncodeAccount(evs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tg.Store.Pool.Exec(ctx, `with a as (select id from accounts where uid = $1),
			  e as (insert into account_events (account_id, holder, first_seq, last_seq, created_at, events)
			        select id, 'shard-x', $2, $3, now(), $4 from a)
			insert into allocations (account_id, holder, event_seq) select id, 'shard-x', $3 from a
			on conflict (account_id, holder) do update set event_seq = excluded.event_seq`, account.ID, b[0], b[1], raw); err != nil {
			t.Fatal(err)
		}
	}
	c.Place(t, m.ID, "BUY", "YES", 11, 1)

	// Live: own's second event and shard-x's three, each stream in order, each message's cursor
	// covering what came.
	at := feed.Cursor{own: 1}
	for n := 0; n < 4; {
		msg := live.Next(t, 30*time.Second)
		if msg.Type != "accountEvents" {
			t.Fatalf("on the orders channel: %s", msg.Raw)
		}
		for _, e := range msg.AccountEvents {
			if e.Seq != at[e.Stream]+1 {
				t.Fatalf("event %d of stream %q after %d: %s", e.Seq, e.Stream, at[e.Stream], msg.Raw)
			}
			at[e.Stream] = e.Seq
			n++
		}
		if cur, err := feed.ParseCursor(msg.Cursor); err != nil || !maps.Equal(cur, at) {
			t.Fatalf("a message's cursor %q, after %v", msg.Cursor, at)
		}
	}

	// A page at a time: in commit order, own 1, shard-x 1 to 3, own 2.
	var pages []string
	var all []feed.AccountEvent
	for cursor := "0"; ; {
		var page accountEventsPage
		c.Expect(t, "GET", "/account/events?limit=1&after="+cursor, nil, http.StatusOK, &page)
		if len(page.Events) == 0 {
			break
		}
		all, pages, cursor = append(all, page.Events...), append(pages, page.Cursor), page.Cursor
	}
	var order []string
	for _, e := range all {
		order = append(order, fmt.Sprintf("%s/%d", e.Stream, e.Seq))
	}
	if want := []string{own + "/1", "shard-x/1", "shard-x/2", "shard-x/3", own + "/2"}; !slices.Equal(order, want) {
		t.Fatalf("the pages hold %v, want %v", order, want)
	}
	if page := c.accountEvents(t, feed.Cursor{}, 2); page.Seq != 0 || page.Cursor != at.String() {
		t.Errorf("the feed of two streams ends at %q (seq %d), want %q and no seq", page.Cursor, page.Seq, at.String())
	}

	// Resume from every cursor a page gave: the events after it, once each.
	for i, cursor := range pages {
		again := c.DialFeed(t)
		again.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "orders", "resumeFrom": cursor})
		if ack := again.ExpectReply(t, "subscribed", ""); ack.Cursor != cursor {
			t.Fatalf("resumed from %q, confirmed %q", cursor, ack.Cursor)
		}
		var got []feed.AccountEvent
		for len(got) < len(all)-i-1 {
			got = append(got, again.Next(t, 30*time.Second).AccountEvents...)
		}
		if !sameAccountEvents(got, all[i+1:]) {
			t.Errorf("resumed from %q: %+v, want %+v", cursor, got, all[i+1:])
		}
		again.Close()
	}
}

// sameOrder compares orders, their times as instants.
func sameOrder(a, b apiserver.Order) bool {
	at, bt := a, b
	at.CreatedAt, at.UpdatedAt, bt.CreatedAt, bt.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	at.ExpiresAt, bt.ExpiresAt = nil, nil
	return reflect.DeepEqual(at, bt) && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		(a.ExpiresAt == nil) == (b.ExpiresAt == nil) && (a.ExpiresAt == nil || a.ExpiresAt.Equal(*b.ExpiresAt))
}

func sameFill(a, b apiserver.Fill) bool {
	at, bt := a, b
	at.CreatedAt, bt.CreatedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(at, bt) && a.CreatedAt.Equal(b.CreatedAt)
}

func sameSettlement(a, b apiserver.Settlement) bool {
	at, bt := a, b
	at.SettledAt, bt.SettledAt = time.Time{}, time.Time{}
	return at == bt && a.SettledAt.Equal(b.SettledAt)
}

// sameAccountEvents compares two lists of account events as their JSON shows them.
func sameAccountEvents(a, b []feed.AccountEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Seq != y.Seq || x.Type != y.Type || !x.At.Equal(y.At) ||
			(x.Order == nil) != (y.Order == nil) || x.Order != nil && !sameOrder(*x.Order, *y.Order) ||
			(x.Fill == nil) != (y.Fill == nil) || x.Fill != nil && !sameFill(*x.Fill, *y.Fill) ||
			(x.Settlement == nil) != (y.Settlement == nil) || x.Settlement != nil && !sameSettlement(*x.Settlement, *y.Settlement) {
			return false
		}
	}
	return true
}

// testAccountFeedFollow trades randomly among four accounts in two markets — placements of every
// time in force, amends, cancels, cancel-everything, then a resolution — and checks each
// account's feed as a bot would use it: numbered gaplessly from 1; the latest state of every
// order in it (its last order event, with the fills after it applied) equal to GET /orders, order by order, with nothing missing on either side; its
// fills those of GET /fills, and each order's fills adding up to its filled quantity.
func testAccountFeedFollow(t *testing.T, tg *Target) {
	markets := []apiserver.Market{tg.NewMarket(t, nil), tg.NewMarket(t, nil)}
	var accounts []*Client
	for range 4 {
		accounts = append(accounts, tg.NewAccount(t, "acct-follow"))
	}
	rng := rand.New(rand.NewPCG(17, 15))
	open := map[*Client][]uuid.UUID{}
	for range 300 {
		c := accounts[rng.IntN(len(accounts))]
		switch r := rng.IntN(20); {
		case r < 13:
			body := OrderBody(markets[rng.IntN(2)].ID, "BUY", []string{"YES", "NO"}[rng.IntN(2)], 30+rng.IntN(40), 1+rng.IntN(6))
			body["timeInForce"] = []string{"GTC", "GTC", "GTC", "IOC", "FOK"}[rng.IntN(5)]
			var o apiserver.PlacedOrder
			if status, raw := c.Do(t, "POST", "/order", body); status == http.StatusCreated {
				if err := json.Unmarshal(raw, &o); err != nil {
					t.Fatal(err)
				}
				if o.Status == "OPEN" || o.Status == "PARTIALLY_FILLED" {
					open[c] = append(open[c], o.ID)
				}
			}
		case r < 16 && len(open[c]) > 0:
			id := open[c][rng.IntN(len(open[c]))]
			c.Do(t, "POST", "/order/amend", map[string]any{"orderId": id, "price": 30 + rng.IntN(40)})
		case r < 19 && len(open[c]) > 0:
			i := rng.IntN(len(open[c]))
			c.Do(t, "POST", "/cancel-order", map[string]any{"orderId": open[c][i]})
			open[c] = append(open[c][:i], open[c][i+1:]...)
		default:
			c.Expect(t, "POST", "/cancel-everything", nil, http.StatusOK, nil)
			open[c] = nil
		}
	}
	tg.Markets.Resolve(t, markets[0].ID, "NO")

	events, fillCount := 0, 0
	defer func() { t.Logf("%d account events, %d fills, over %d accounts", events, fillCount, len(accounts)) }()
	for _, c := range accounts {
		feedOrders := map[uuid.UUID]apiserver.Order{}
		filled := map[uuid.UUID]int64{}
		var feedFills []apiserver.Fill
		settled := 0
		for _, e := range c.accountEvents(t, feed.Cursor{}, 1000).Events {
			events++
			switch e.Type {
			case feed.AccountFill:
				feedFills = append(feedFills, *e.Fill)
				fillCount++
				filled[e.Fill.OrderID] += e.Fill.Quantity
				o, ok := feedOrders[e.Fill.OrderID]
				if !ok {
					t.Fatalf("a fill of order %s before its accepted event", e.Fill.OrderID)
				}
				if e.FilledQuantity != filled[e.Fill.OrderID] {
					t.Errorf("order %s: its fills add up to %d, the fill event says %d", o.ID, filled[o.ID], e.FilledQuantity)
				}
				o.FilledQuantity, o.Status, o.UpdatedAt = e.FilledQuantity, e.Status, e.At
				feedOrders[o.ID] = o
				continue
			case feed.AccountSettled:
				settled++
				continue
			}
			feedOrders[e.Order.ID] = *e.Order
		}
		rest := map[uuid.UUID]apiserver.Order{}
		cursor := ""
		for range 100 {
			var page struct {
				Orders     []apiserver.Order
				NextCursor *string
			}
			c.Expect(t, "GET", "/orders?limit=500"+cursor, nil, http.StatusOK, &page)
			for _, o := range page.Orders {
				rest[o.ID] = o
			}
			if page.NextCursor == nil {
				break
			}
			cursor = "&cursor=" + *page.NextCursor
		}
		if len(rest) != len(feedOrders) {
			t.Errorf("GET /orders has %d orders, the feed %d", len(rest), len(feedOrders))
		}
		for id, o := range rest {
			if f, ok := feedOrders[id]; !ok || !sameOrder(f, o) {
				t.Errorf("order %s: GET /orders %+v, the feed's last state %+v", id, o, f)
			}
			if filled[id] != o.FilledQuantity {
				t.Errorf("order %s: filled %d, its fill events add up to %d", id, o.FilledQuantity, filled[id])
			}
		}
		var fills fillsPage
		c.Expect(t, "GET", "/fills?limit=500", nil, http.StatusOK, &fills)
		if len(fills.Fills) != len(feedFills) {
			t.Errorf("GET /fills has %d fills, the feed %d", len(fills.Fills), len(feedFills))
		}
		byID := map[uuid.UUID]apiserver.Fill{}
		for _, f := range feedFills {
			byID[f.ID] = f
		}
		for _, f := range fills.Fills {
			if g, ok := byID[f.ID]; !ok || !sameFill(f, g) {
				t.Errorf("fill %s: GET /fills %+v, the feed %+v", f.ID, f, g)
			}
		}
		var settlements struct{ Settlements []apiserver.Settlement }
		c.Expect(t, "GET", "/settlements", nil, http.StatusOK, &settlements)
		if settled != len(settlements.Settlements) {
			t.Errorf("%d settlements, %d settled events", len(settlements.Settlements), settled)
		}
	}
}
