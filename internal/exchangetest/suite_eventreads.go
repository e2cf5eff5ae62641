package exchangetest

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// eventPage is one page of GET /events.
type eventPage struct {
	Events     []apiserver.Event
	NextCursor *string
}

// testEventReads covers GET /events and GET /event: their refusals, the status filter,
// newest-first order, cursor pages, each outcome's YES prices after some trading, and the sum of
// the mids.
func testEventReads(t *testing.T, tg *Target) {
	c := tg.NewAccount(t, "evreads")
	c.ExpectError(t, "GET", "/event", nil, http.StatusBadRequest, "missing_field")
	c.ExpectError(t, "GET", "/event?eventId=", nil, http.StatusBadRequest, "missing_field")
	c.ExpectError(t, "GET", "/event?eventId=42", nil, http.StatusBadRequest, "invalid_uuid")
	if e := c.ExpectError(t, "GET", "/event?eventId="+uuid.NewString(), nil, http.StatusNotFound, "event_not_found"); e.Details.Field != "eventId" {
		t.Errorf("an unknown event's refusal names %q, want eventId", e.Details.Field)
	}
	c.ExpectError(t, "GET", "/events?status=open", nil, http.StatusBadRequest, "invalid_value")
	c.ExpectError(t, "GET", "/events?limit=0", nil, http.StatusBadRequest, "out_of_range")
	c.ExpectError(t, "GET", "/events?limit=501", nil, http.StatusBadRequest, "out_of_range")
	c.ExpectError(t, "GET", "/events?cursor=not-a-cursor", nil, http.StatusBadRequest, "invalid_cursor")
	var page eventPage
	c.Expect(t, "GET", "/events", nil, http.StatusOK, &page)
	if page.Events == nil {
		t.Fatal("GET /events answered no events list")
	}

	older, closed, newer := newEvent(t, tg, "a", "b", "c"), newEvent(t, tg, "x", "y"), newEvent(t, tg, "p", "q", "r", "s")
	tg.events().Close(t, closed.ID)
	ids := func(q string) []uuid.UUID {
		t.Helper()
		var p eventPage
		c.Expect(t, "GET", "/events?limit=500"+q, nil, http.StatusOK, &p)
		out := make([]uuid.UUID, len(p.Events))
		for i, e := range p.Events {
			out[i] = e.ID
		}
		return out
	}
	all := ids("")
	at := func(list []uuid.UUID, id uuid.UUID) int { return slices.Index(list, id) }
	if n, cl, o := at(all, newer.ID), at(all, closed.ID), at(all, older.ID); n < 0 || cl < 0 || o < 0 || !(n < cl && cl < o) {
		t.Fatalf("GET /events is not newest first: the newest at %d, the closed at %d, the oldest at %d", n, cl, o)
	}
	if open := ids("&status=OPEN"); at(open, closed.ID) >= 0 || at(open, older.ID) < 0 || at(open, newer.ID) < 0 {
		t.Errorf("status=OPEN lists %v", open)
	}
	if cl := ids("&status=CLOSED"); at(cl, closed.ID) < 0 || at(cl, older.ID) >= 0 || at(cl, newer.ID) >= 0 {
		t.Errorf("status=CLOSED lists %v", cl)
	}
	testEventPages(t, c, "", all)
	testEventPages(t, c, "&status=OPEN", ids("&status=OPEN"))

	// Prices: outcome a trades at 30 and keeps a bid at 25 and an ask at 40; b has a lone bid at
	// 20; c's book is empty.
	buyer, seller := tg.NewAccount(t, "evreads-yes"), tg.NewAccount(t, "evreads-no")
	a, b := older.Outcomes[0].MarketID, older.Outcomes[1].MarketID
	buyer.Place(t, a, "BUY", "YES", 30, 5)
	seller.Place(t, a, "BUY", "NO", 70, 5) // a YES ask at 30: trades
	buyer.Place(t, a, "BUY", "YES", 25, 2)
	seller.Place(t, a, "BUY", "NO", 60, 2) // a YES ask at 40: rests
	buyer.Place(t, b, "BUY", "YES", 20, 1)
	var d apiserver.EventDetail
	c.Expect(t, "GET", "/event?eventId="+older.ID.String(), nil, http.StatusOK, &d)
	if d.ID != older.ID || d.Name != older.Name || d.Question != older.Question || d.Category != older.Category ||
		d.Status != "OPEN" || d.Resolution != nil || !d.CreatedAt.Equal(older.CreatedAt) || len(d.Outcomes) != 3 {
		t.Fatalf("GET /event = %+v, want the event %+v", d, older)
	}
	price := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	want := []struct {
		bid, ask, last int
		mid            float64
	}{{25, 40, 30, 32.5}, {20, 0, 0, 60}, {0, 0, 0, 50}}
	for i, o := range d.Outcomes {
		w := want[i]
		if o.Key != older.Outcomes[i].Key || o.Label != older.Outcomes[i].Label || o.MarketID != older.Outcomes[i].MarketID {
			t.Errorf("outcome %d is %+v, want %+v", i, o, older.Outcomes[i])
		}
		if price(o.BestBid) != w.bid || price(o.BestAsk) != w.ask || price(o.LastPrice) != w.last || o.YesMid != w.mid {
			t.Errorf("outcome %q: bid %d ask %d last %d mid %v, want %d %d %d %v (0: null)", o.Key,
				price(o.BestBid), price(o.BestAsk), price(o.LastPrice), o.YesMid, w.bid, w.ask, w.last, w.mid)
		}
	}
	if d.YesMidSum != 32.5+60+50 {
		t.Errorf("yesMidSum is %v, want 142.5", d.YesMidSum)
	}

	// Resolved: the event says its winner, and leaving OPEN emptied every book.
	tg.events().Resolve(t, older.ID, "b")
	c.Expect(t, "GET", "/event?eventId="+older.ID.String(), nil, http.StatusOK, &d)
	if d.Status != "RESOLVED" || d.Resolution == nil || *d.Resolution != "b" {
		t.Fatalf("GET /event after resolving to b: %s, resolution %v", d.Status, d.Resolution)
	}
	for _, o := range d.Outcomes {
		if o.BestBid != nil || o.BestAsk != nil || o.YesMid != 50 {
			t.Errorf("outcome %q of a resolved event: bid %v ask %v mid %v, want an empty book", o.Key, o.BestBid, o.BestAsk, o.YesMid)
		}
	}
	if d.YesMidSum != 150 {
		t.Errorf("a resolved event's yesMidSum is %v, want 150 (three empty books)", d.YesMidSum)
	}
}

// testEventPages walks GET /events two at a time (with the filter q) and checks that the pages,
// put together, are want (the list in one page): each event once, in order, and the last page's
// nextCursor null.
func testEventPages(t *testing.T, c *Client, q string, want []uuid.UUID) {
	t.Helper()
	var got []uuid.UUID
	cursor := ""
	for range len(want)/2 + 2 { // bounded: one page more than the list needs
		var p eventPage
		c.Expect(t, "GET", "/events?limit=2"+q+cursor, nil, http.StatusOK, &p)
		if len(p.Events) > 2 {
			t.Fatalf("a page of limit 2 holds %d events", len(p.Events))
		}
		for _, e := range p.Events {
			got = append(got, e.ID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = "&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("GET /events%s in pages of 2: %v, want %v", q, got, want)
	}
}

// testEventLifecycleFeed: the lifecycle channel carries an event's status changes as its
// markets' messages, each naming the event (eventId): its markets are listed with it, and closing
// the event sends a CLOSED status message for every one of them.
func testEventLifecycleFeed(t *testing.T, tg *Target) {
	f := tg.NewAccount(t, "evlifecycle").DialFeed(t)
	defer f.Close()
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "lifecycle"})
	f.ExpectReply(t, "subscribed", "")
	e := newEvent(t, tg, "up", "down")
	outcome := map[string]string{}
	for _, o := range e.Outcomes {
		outcome[o.MarketID.String()] = o.Key
	}
	// until reads the channel until every market of the event has sent a message of status,
	// each naming the event. (Other markets' changes may come too.)
	until := func(status string) {
		t.Helper()
		seen := map[string]bool{}
		for range 10_000 {
			if len(seen) == len(outcome) {
				return
			}
			msg := f.Next(t, 30*time.Second)
			if _, ours := outcome[msg.MarketID]; msg.Type != "market" || !ours || msg.Status != status {
				continue
			}
			if msg.EventID != e.ID.String() {
				t.Fatalf("outcome %q's market's lifecycle message does not name its event %s: %s", outcome[msg.MarketID], e.ID, msg.Raw)
			}
			seen[msg.MarketID] = true
		}
		t.Fatalf("the lifecycle channel never told every market of the event as %s", status)
	}
	until("OPEN")
	tg.events().Close(t, e.ID)
	until("CLOSED")
}
