package exchangetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/pmx-dev/pmx/internal/feed"
)

// eventsPage is GET /market/events's answer.
type eventsPage struct {
	Events []feed.Event
}

// testMarketEvents follows a market's feed through random trading and its closing: the sequence
// is gapless from 1, and the events applied in order give the book the snapshot shows at its seq.
func testMarketEvents(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	id := m.ID.String()
	traders := []*Client{tg.NewAccount(t, "feed"), tg.NewAccount(t, "feed"), tg.NewAccount(t, "feed")}
	book := traders[0].Book(t, m.ID)
	var page eventsPage
	traders[0].Expect(t, "GET", "/market/events?marketId="+id, nil, http.StatusOK, &page)
	if book.Seq != 0 || len(page.Events) != 0 {
		t.Fatalf("a new market: seq %d, %d events", book.Seq, len(page.Events))
	}

	rng := rand.New(rand.NewPCG(1, 2))
	for range 60 {
		c := traders[rng.IntN(len(traders))]
		outcome := []string{"YES", "NO"}[rng.IntN(2)]
		c.Place(t, m.ID, "BUY", outcome, 35+rng.IntN(30), 1+rng.IntN(5))
	}
	traders[1].Expect(t, "POST", "/cancel-everything", nil, http.StatusOK, nil)

	// Follow the feed in small pages up to the snapshot's seq, and rebuild the book from it.
	snap := traders[0].Book(t, m.ID)
	levels := map[string]map[int]int64{"bid": {}, "ask": {}}
	var next int64 = 1
	for next <= snap.Seq {
		page = eventsPage{}
		traders[2].Expect(t, "GET", fmt.Sprintf("/market/events?marketId=%s&after=%d&limit=7", id, next-1), nil, http.StatusOK, &page)
		if len(page.Events) == 0 || len(page.Events) > 7 {
			t.Fatalf("after %d: %d events", next-1, len(page.Events))
		}
		for _, e := range page.Events {
			if e.Seq != next {
				t.Fatalf("event %d follows %d: the sequence has a gap or a repeat", e.Seq, next-1)
			}
			next++
			if e.Type == feed.TypeLevel && e.Seq <= snap.Seq {
				levels[e.Side][e.Price] = e.Quantity
			}
		}
	}
	for side, want := range map[string][]Level{"bid": snap.Yes.Bids, "ask": snap.Yes.Asks} {
		got := map[int]int64{}
		for p, q := range levels[side] {
			if q != 0 {
				got[p] = q
			}
		}
		for _, l := range want {
			if got[l.Price] != l.Quantity {
				t.Errorf("%s %d: the feed rebuilt %d, the book shows %d", side, l.Price, got[l.Price], l.Quantity)
			}
		}
		if len(want) < 10 && len(got) != len(want) {
			t.Errorf("%s: the feed rebuilt %d levels, the book shows %d", side, len(got), len(want))
		}
	}

	// Closing the market is an event, and so is every level it empties.
	tg.Markets.Close(t, m.ID)
	page = eventsPage{}
	traders[0].Expect(t, "GET", fmt.Sprintf("/market/events?marketId=%s&after=%d", id, snap.Seq), nil, http.StatusOK, &page)
	closed := false
	for _, e := range page.Events {
		closed = closed || e.Type == feed.TypeStatus && e.Status == "CLOSED"
		if e.Type == feed.TypeLevel && e.Quantity != 0 {
			t.Errorf("closing left a level of %d at %s %d", e.Quantity, e.Side, e.Price)
		}
	}
	if !closed {
		t.Errorf("no status event for the closing: %+v", page.Events)
	}

	// Refusals: bad parameters, an unknown market, and events no longer kept.
	c := traders[0]
	c.ExpectError(t, "GET", "/market/events?marketId="+id+"&after=-1", nil, http.StatusBadRequest, "out_of_range")
	c.ExpectError(t, "GET", "/market/events?marketId="+id+"&limit=1001", nil, http.StatusBadRequest, "out_of_range")
	closedMarket, err := tg.Store.Market(context.Background(), m.ID) // the market is closed: its last seq stays
	if err != nil {
		t.Fatal(err)
	}
	last := closedMarket.EventSeq
	c.ExpectError(t, "GET", fmt.Sprintf("/market/events?marketId=%s&after=%d", id, last+1), nil, http.StatusBadRequest, "out_of_range")
	c.Expect(t, "GET", fmt.Sprintf("/market/events?marketId=%s&after=%d", id, last), nil, http.StatusOK, &page)
	if len(page.Events) != 0 {
		t.Errorf("events after the last seq %d: %+v", last, page.Events)
	}
	c.ExpectError(t, "GET", "/market/events", nil, http.StatusBadRequest, "missing_field")
	c.ExpectError(t, "GET", "/market/events?marketId=00000000-0000-4000-8000-000000000000", nil, http.StatusBadRequest, "market_not_found")
	if _, err := tg.Store.Pool.Exec(context.Background(), `delete from market_events where market_id = $1 and first_seq = 1`, m.ID); err != nil {
		t.Fatal(err)
	}
	c.ExpectError(t, "GET", "/market/events?marketId="+id+"&after=0", nil, http.StatusGone, "resync_required")
}
