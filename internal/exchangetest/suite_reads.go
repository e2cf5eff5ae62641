package exchangetest

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

type fillsPage struct {
	Fills      []apiserver.Fill
	NextCursor *string
}

// testFills checks GET /fills: each side of a trade sees its own fill, with its role and its
// order's side, outcome and price; pages, the market filter and the refusals.
func testFills(t *testing.T, tg *Target) {
	m, other := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	maker, taker := tg.NewAccount(t, "maker"), tg.NewAccount(t, "taker")
	body := OrderBody(m.ID, "BUY", "YES", 40, 10)
	body["clientOrderId"] = "mk-1"
	var resting apiserver.PlacedOrder
	maker.Expect(t, "POST", "/order", body, http.StatusCreated, &resting)
	hit := taker.Place(t, m.ID, "BUY", "NO", 60, 3) // a YES ask at 40: trades at 40
	if len(hit.Trades) != 1 {
		t.Fatalf("the taker's order made %d trades", len(hit.Trades))
	}
	tradeID := hit.Trades[0].ID

	var mk, tk fillsPage
	maker.Expect(t, "GET", "/fills", nil, http.StatusOK, &mk)
	taker.Expect(t, "GET", "/fills", nil, http.StatusOK, &tk)
	if len(mk.Fills) != 1 || len(tk.Fills) != 1 || mk.NextCursor != nil {
		t.Fatalf("maker's fills %+v, taker's %+v", mk, tk)
	}
	f, g := mk.Fills[0], tk.Fills[0]
	if f.Role != "MAKER" || f.TradeID != tradeID || f.OrderID != resting.ID || f.ClientOrderID == nil || *f.ClientOrderID != "mk-1" ||
		f.MarketID != m.ID || f.Side != "BUY" || f.Outcome != "YES" || f.Price != 40 || f.Quantity != 3 {
		t.Errorf("the maker's fill %+v", f)
	}
	if g.Role != "TAKER" || g.TradeID != tradeID || g.OrderID != hit.ID || g.ClientOrderID != nil ||
		g.Side != "BUY" || g.Outcome != "NO" || g.Price != 60 || g.Quantity != 3 {
		t.Errorf("the taker's fill %+v", g)
	}
	if f.ID == g.ID || f.ID == uuid.Nil {
		t.Errorf("fill ids %s and %s", f.ID, g.ID)
	}

	// Three more fills in the market, one in another: pages of two, newest first, and a filter.
	for range 3 {
		taker.Place(t, m.ID, "BUY", "NO", 60, 1)
	}
	maker.Place(t, other.ID, "BUY", "YES", 30, 1)
	taker.Place(t, other.ID, "BUY", "NO", 70, 1)
	seen := map[uuid.UUID]bool{}
	var last time.Time
	path := "/fills?limit=2&marketId=" + m.ID.String()
	for pages := 0; ; pages++ {
		if pages == 5 {
			t.Fatal("more pages than fills")
		}
		var p fillsPage
		maker.Expect(t, "GET", path, nil, http.StatusOK, &p)
		for _, x := range p.Fills {
			if seen[x.ID] || x.MarketID != m.ID || (!last.IsZero() && x.CreatedAt.After(last)) {
				t.Fatalf("fill %+v: repeated, of another market, or out of order", x)
			}
			seen[x.ID], last = true, x.CreatedAt
		}
		if p.NextCursor == nil {
			break
		}
		path = "/fills?limit=2&marketId=" + m.ID.String() + "&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if len(seen) != 4 {
		t.Errorf("%d fills in the market over the pages, want 4", len(seen))
	}
	var all fillsPage
	maker.Expect(t, "GET", "/fills", nil, http.StatusOK, &all)
	if len(all.Fills) != 5 {
		t.Errorf("%d fills in all markets, want 5", len(all.Fills))
	}

	maker.ExpectError(t, "GET", "/fills?cursor=bogus", nil, http.StatusBadRequest, "invalid_cursor")
	maker.ExpectError(t, "GET", "/fills?marketId=nope", nil, http.StatusBadRequest, "invalid_uuid")
	maker.ExpectError(t, "GET", "/fills?limit=0", nil, http.StatusBadRequest, "out_of_range")
}

type candlesPage struct {
	Interval string
	Candles  []apiserver.Candle
}

// testCandles checks GET /market/candles against candles the test computes itself from its own
// fills, at two intervals, and the refusals.
func testCandles(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	id := m.ID.String()
	a, b := tg.NewAccount(t, "candles"), tg.NewAccount(t, "candles")
	// Trades at YES prices 40 (2 shares), 45 (1), 50 (3), 42 (1).
	for _, tr := range []struct{ price, qty int }{{40, 2}, {45, 1}, {50, 3}, {42, 1}} {
		a.Place(t, m.ID, "BUY", "YES", tr.price, tr.qty)
		b.Place(t, m.ID, "BUY", "NO", 100-tr.price, tr.qty)
	}
	var fills fillsPage
	a.Expect(t, "GET", "/fills?marketId="+id, nil, http.StatusOK, &fills)
	if len(fills.Fills) != 4 {
		t.Fatalf("%d fills, want 4", len(fills.Fills))
	}
	for _, iv := range []struct {
		name  string
		every time.Duration
	}{{"1m", time.Minute}, {"1d", 24 * time.Hour}} {
		// The candles the fills make, oldest first (the fills come newest first).
		var want []apiserver.Candle
		for i := len(fills.Fills) - 1; i >= 0; i-- {
			f := fills.Fills[i]
			start := f.CreatedAt.Truncate(iv.every) // UTC-aligned: Truncate counts from the zero time
			if n := len(want); n == 0 || !want[n-1].Start.Equal(start) {
				want = append(want, apiserver.Candle{Start: start, Open: f.Price, High: f.Price, Low: f.Price})
			}
			c := &want[len(want)-1]
			c.High, c.Low, c.Close = max(c.High, f.Price), min(c.Low, f.Price), f.Price
			c.Volume += f.Quantity
			c.Trades++
		}
		var got candlesPage
		a.Expect(t, "GET", "/market/candles?marketId="+id+"&interval="+iv.name, nil, http.StatusOK, &got)
		if got.Interval != iv.name || len(got.Candles) != len(want) {
			t.Fatalf("%s candles %+v, want %+v", iv.name, got, want)
		}
		for i := range want {
			if g := got.Candles[i]; !g.Start.Equal(want[i].Start) || g.Open != want[i].Open || g.High != want[i].High ||
				g.Low != want[i].Low || g.Close != want[i].Close || g.Volume != want[i].Volume || g.Trades != want[i].Trades {
				t.Errorf("%s candle %d: %+v, want %+v", iv.name, i, g, want[i])
			}
		}
	}
	// A window that holds no trade has no candles.
	var empty candlesPage
	a.Expect(t, "GET", "/market/candles?marketId="+id+"&interval=1h&from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z", nil, http.StatusOK, &empty)
	if len(empty.Candles) != 0 {
		t.Errorf("candles of 2020: %+v", empty.Candles)
	}

	for _, bad := range []struct{ query, code string }{
		{"interval=1m", "missing_field"},
		{"marketId=" + id + "&interval=2m", "invalid_value"},
		{"marketId=" + id, "invalid_value"},
		{"marketId=" + id + "&interval=1m&from=yesterday", "invalid_value"},
		{"marketId=" + id + "&interval=1m&from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z", "out_of_range"},
		{"marketId=" + id + "&interval=1m&from=2030-01-01T00:00:00Z&to=2030-01-02T00:00:00Z", "out_of_range"}, // 1,440 minutes
		{"marketId=" + uuid.NewString() + "&interval=1m", "market_not_found"},
	} {
		a.ExpectError(t, "GET", "/market/candles?"+bad.query, nil, http.StatusBadRequest, bad.code)
	}
}
