package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
)

// pageRow is a row of the markets list as the page shows it.
type pageRow struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Price  string `json:"price"` // "" when the market has not traded
	Volume string `json:"volume"`
}

// pageLevel is a ladder row, pageTrade a trade row, pagePoint a price chart point.
type pageLevel struct {
	Price, Quantity, Total int64
}

type pageTrade struct {
	ID        string `json:"id"`
	YesPrice  int    `json:"yesPrice"`
	Quantity  int64  `json:"quantity"`
	CreatedAt string `json:"createdAt"`
}

type pagePoint struct {
	Start  string `json:"start"`
	Close  int    `json:"close"`
	Volume int64  `json:"volume"`
}

const (
	readListJS = `[...document.querySelectorAll("#markets tbody tr")].map(tr => ({id: tr.dataset.market,
		status: tr.querySelector(".status").textContent, price: tr.querySelector(".last-price").dataset.price,
		volume: tr.querySelector(".volume").dataset.volume}))`
	readLadderJS = `(() => { const rows = sel => [...document.querySelectorAll(sel + " tr")].map(tr =>
		({Price: +tr.dataset.price, Quantity: +tr.dataset.quantity, Total: +tr.dataset.total}));
		return {bids: rows("#bids"), asks: rows("#asks").reverse()}; })()`
	readTradesJS = `[...document.querySelectorAll("#trades tbody tr")].map(tr => ({id: tr.dataset.trade,
		yesPrice: +tr.dataset.yesPrice, quantity: +tr.dataset.quantity, createdAt: tr.dataset.createdAt}))`
	readChartJS = `(() => { const svg = document.getElementById("price-chart");
		return {interval: svg.dataset.interval, from: svg.dataset.from, to: svg.dataset.to,
		points: [...svg.querySelectorAll("circle.point")].map(c => ({start: c.dataset.start, close: +c.dataset.close, volume: +c.dataset.volume}))}; })()`
	fitsJS = `document.documentElement.scrollWidth <= window.innerWidth`
)

// TestMarketPagesInBrowser opens the markets list and a market's page in Chromium without a key,
// checks that every value they show equals the API's answer, trades while the page is open and
// sees the page follow without a reload, and gets a clear 404 for a bad id.
func TestMarketPagesInBrowser(t *testing.T) {
	tg := exchangetest.StartDev(t)
	closes := time.Now().UTC().Add(30 * 24 * time.Hour).Truncate(time.Hour)
	m := tg.NewMarket(t, map[string]any{"question": "Will Lisbon's metro reach the airport's new terminal by June 2027?",
		"description": "Resolves YES if a red line train carries passengers to the new terminal's station before 1 June 2027 (Lisbon time).",
		"category":    "transport", "closesAt": closes, "resolvesAt": closes.Add(24 * time.Hour)})
	quiet := tg.NewMarket(t, map[string]any{"question": "Will it snow in Porto this winter?", "category": "weather"})
	other := tg.NewMarket(t, map[string]any{"question": "Will the 2027 Tour de France start in Barcelona?", "category": "sport"})
	alice, bob, carol := tg.NewAccount(t, "alice"), tg.NewAccount(t, "bob"), tg.NewAccount(t, "carol")
	// A book both sides deep, and trades on both outcomes.
	for i, p := range []int{44, 42, 41, 39, 37, 35, 33, 30, 28, 25, 22} { // 11 bids: the ladder shows 10
		alice.Place(t, m.ID, "BUY", "YES", p, 40+15*i)
	}
	for i, p := range []int{54, 52, 51, 49, 47, 45} { // NO bids: YES asks at 46, 48, 49, 51, 53, 55
		bob.Place(t, m.ID, "BUY", "NO", p, 30+25*i)
	}
	carol.Place(t, m.ID, "BUY", "YES", 49, 45)  // takes the YES asks at 46 (30) and 48 (15)
	carol.Place(t, m.ID, "SELL", "YES", 44, 20) // sells 20 back into the YES bid at 44
	bob.Place(t, other.ID, "BUY", "NO", 70, 10)
	carol.Place(t, other.ID, "BUY", "YES", 30, 6)

	browser := startBrowser(t)
	ctx, cancel := context.WithTimeout(browser, 3*time.Minute)
	defer cancel()
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string, out any) {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
		if err != nil {
			t.Fatalf("evaluating %s: %v", expr, err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("reading %s: %v", raw, err)
		}
	}
	// await polls the page until expr is true, for at most 20 s: a live update arrives within
	// about a second (the hub sweeps once a second if a stream missed it).
	await := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Fatalf("waiting for %s (%s): %v", what, expr, err)
		}
	}
	open := func(path string, want int64) {
		t.Helper()
		resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(tg.URL+path))
		if err != nil {
			t.Fatalf("opening %s: %v", path, err)
		}
		if resp.Status != want {
			t.Fatalf("%s answered %d, want %d", path, resp.Status, want)
		}
	}

	// The list: every market, newest first, with the API's status, last price and volume.
	open("/markets", http.StatusOK)
	checkList(t, alice, eval)
	await("the list to follow the feed", `document.getElementById("live").dataset.state === "live"`)
	carol.Place(t, other.ID, "BUY", "YES", 30, 4) // 4 more of bob's NO bid at 70
	await("the list to show the new trade", fmt.Sprintf(`document.querySelector('tr[data-market="%s"] .volume').dataset.volume === "10"`, other.ID))
	checkList(t, alice, eval)
	await("the row's highlight to fade", `!document.querySelector("tr.fresh")`)
	shoot(t, ctx, "PMX_SCREENSHOT_MARKETS", false)

	// A market's page: its facts, book in both views, trades and chart are the API's.
	open("/markets/"+m.ID.String(), http.StatusOK)
	await("the page to follow the book", `document.getElementById("ladder").dataset.live === "true"`)
	var facts map[string]string
	eval(`({question: document.getElementById("question").textContent, description: document.getElementById("description").textContent,
		status: document.getElementById("status").textContent, created: document.getElementById("created-at").getAttribute("datetime"),
		closes: document.getElementById("closes-at").getAttribute("datetime"), resolves: document.getElementById("resolves-at").getAttribute("datetime")})`, &facts)
	var api apiserver.Market
	alice.Expect(t, "GET", "/market?marketId="+m.ID.String(), nil, http.StatusCreated, &api)
	want := map[string]string{"question": api.Question, "description": *api.Description, "status": api.Status,
		"created": jsonTime(t, api.CreatedAt), "closes": jsonTime(t, *api.ClosesAt), "resolves": jsonTime(t, *api.ResolvesAt)}
	if !reflect.DeepEqual(facts, want) {
		t.Fatalf("the page shows %v, the API %v", facts, want)
	}
	checkMarket(t, alice, m.ID, run, eval, await)
	shoot(t, ctx, "PMX_SCREENSHOT_MARKET", false)
	shoot(t, ctx, "PMX_SCREENSHOT_MARKET_PHONE", true)

	// Trading while the page is open: it follows without a reload.
	run("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	alice.Place(t, m.ID, "BUY", "YES", 46, 12) // a new best bid
	await("the new bid", `document.querySelector('#bids tr[data-price="46"]')?.dataset.quantity === "12"`)
	sold := carol.Place(t, m.ID, "SELL", "YES", 46, 5)
	await("the new trade", fmt.Sprintf(`document.querySelector("#trades tbody tr")?.dataset.trade === %q`, sold.Trades[0].ID))
	await("the new last price", `document.getElementById("last-price").dataset.price === "46"`)
	checkMarket(t, alice, m.ID, run, eval, await)
	tg.Markets.Close(t, m.ID)
	await("the market closed", `document.getElementById("status").dataset.status === "CLOSED" && !document.querySelector("#bids tr")`)
	checkMarket(t, alice, m.ID, run, eval, await)
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !ok {
		t.Fatalf("the page reloaded to follow the market (%v)", err)
	}

	// Both pages fit a phone's width.
	run("phone width", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile))
	for _, path := range []string{"/markets", "/markets/" + quiet.ID.String(), "/markets/" + m.ID.String()} {
		open(path, http.StatusOK)
		if fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fitsJS)); err != nil || !fits {
			t.Fatalf("at %dpx %s is wider than the screen (%v)", phoneWidth, path, err)
		}
	}
	run("laptop width", chromedp.EmulateViewport(laptopWidth, laptopHeight))

	// An empty book's depth chart: its scale reads each value once (it read 1, 1 and 0).
	open("/markets/"+quiet.ID.String(), http.StatusOK)
	await("the empty depth chart", `document.querySelectorAll("#depth text.tick").length > 0`)
	var scale []string
	eval(`(() => { const left = +document.querySelector("#depth line.axis").getAttribute("x1");
		return Array.from(document.querySelectorAll("#depth text.tick")).filter(e => +e.getAttribute("x") < left).map(e => e.textContent); })()`, &scale)
	seen := map[string]bool{}
	for _, v := range scale {
		if seen[v] {
			t.Fatalf("the empty book's depth scale reads %q, want each value once", scale)
		}
		seen[v] = true
	}
	if len(scale) < 2 {
		t.Fatalf("the empty book's depth scale reads %q, want at least its two ends", scale)
	}

	// A bad id: a page that says so, and where to go.
	for _, id := range []string{"no-such-market", uuid.NewString()} {
		open("/markets/"+url.PathEscape(id), http.StatusNotFound)
		var page map[string]string
		eval(`({title: document.querySelector("h1").textContent, error: document.getElementById("error").textContent,
			link: document.getElementById("to-list").getAttribute("href")})`, &page)
		if page["title"] != "No such market" || page["link"] != "/markets" ||
			page["error"] != "No market has the id “"+id+"”. It may be mistyped; every market is listed on the markets page." {
			t.Fatalf("the page for market %q says %v", id, page)
		}
	}
}

// checkList compares the markets list on the page with the API: every market in the API's order,
// its status, its last trade price (GET /market/order-book) and its volume (GET /market/candles
// by day over its life).
func checkList(t *testing.T, c *exchangetest.Client, eval func(string, any)) {
	t.Helper()
	var rows []pageRow
	eval(readListJS, &rows)
	var list struct {
		Markets []apiserver.Market `json:"markets"`
	}
	c.Expect(t, "GET", "/markets", nil, http.StatusOK, &list)
	var want []pageRow
	for _, m := range list.Markets {
		row := pageRow{ID: m.ID.String(), Status: m.Status}
		if p := c.Book(t, m.ID).Yes.LastTradePrice; p != nil {
			row.Price = fmt.Sprint(*p)
		}
		var candles struct {
			Candles []apiserver.Candle `json:"candles"`
		}
		c.Expect(t, "GET", "/market/candles?"+url.Values{"marketId": {m.ID.String()}, "interval": {"1d"},
			"from": {m.CreatedAt.Format(time.RFC3339Nano)}, "to": {time.Now().UTC().Add(time.Minute).Format(time.RFC3339Nano)}}.Encode(),
			nil, http.StatusOK, &candles)
		var volume int64
		for _, k := range candles.Candles {
			volume += k.Volume
		}
		row.Volume = fmt.Sprint(volume)
		want = append(want, row)
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("the list shows\n%+v\nthe API\n%+v", rows, want)
	}
}

// checkMarket compares a market page with the API: the ladder in the YES and the NO view (GET
// /market/order-book), the recent trades (GET /market/trades) and the price chart's points (GET
// /market/candles with the page's interval, from and to). The page's script must have caught up
// with the API first, which the ladder's seq says.
func checkMarket(t *testing.T, c *exchangetest.Client, id uuid.UUID, run func(string, ...chromedp.Action[chromedp.Void]),
	eval func(string, any), await func(what, expr string)) {
	t.Helper()
	book := c.Book(t, id)
	await("the page to catch up with the book's seq", fmt.Sprintf(`+document.getElementById("ladder").dataset.seq >= %d`, book.Seq))
	var apiTrades []apiserver.Trade
	c.Expect(t, "GET", "/market/trades?marketId="+id.String(), nil, http.StatusOK, &apiTrades)
	if len(apiTrades) > 0 {
		await("the page to show the last trade", fmt.Sprintf(`document.querySelector("#trades tbody tr")?.dataset.trade === %q`, apiTrades[0].ID))
	}
	levels := func(ls []exchangetest.Level) []pageLevel {
		out := []pageLevel{}
		for _, l := range ls {
			out = append(out, pageLevel{Price: int64(l.Price), Quantity: l.Quantity, Total: l.Total})
		}
		return out
	}
	for _, v := range []struct {
		button string
		view   exchangetest.View
	}{{"view-yes", book.Yes}, {"view-no", book.No}} {
		run("show the "+v.button, chromedp.Click(chromedp.ID(v.button)))
		var got struct{ Bids, Asks []pageLevel }
		eval(readLadderJS, &got)
		if got.Bids == nil {
			got.Bids = []pageLevel{}
		}
		if got.Asks == nil {
			got.Asks = []pageLevel{}
		}
		if wantBids, wantAsks := levels(v.view.Bids), levels(v.view.Asks); !reflect.DeepEqual(got.Bids, wantBids) || !reflect.DeepEqual(got.Asks, wantAsks) {
			t.Fatalf("%s: the ladder shows bids %v asks %v, the API bids %v asks %v", v.button, got.Bids, got.Asks, wantBids, wantAsks)
		}
	}
	run("back to YES", chromedp.Click(chromedp.ID("view-yes")))

	var trades []pageTrade
	eval(readTradesJS, &trades)
	wantTrades := []pageTrade{}
	for _, tr := range apiTrades {
		wantTrades = append(wantTrades, pageTrade{ID: tr.ID.String(), YesPrice: tr.YesPrice, Quantity: tr.Quantity, CreatedAt: jsonTime(t, tr.CreatedAt)})
	}
	if trades == nil {
		trades = []pageTrade{}
	}
	if !reflect.DeepEqual(trades, wantTrades) {
		t.Fatalf("the page lists the trades\n%+v\nthe API\n%+v", trades, wantTrades)
	}

	var chart struct {
		Interval, From, To string
		Points             []pagePoint
	}
	eval(readChartJS, &chart)
	var candles struct {
		Candles []apiserver.Candle `json:"candles"`
	}
	c.Expect(t, "GET", "/market/candles?"+url.Values{"marketId": {id.String()}, "interval": {chart.Interval},
		"from": {chart.From}, "to": {time.Now().UTC().Add(time.Minute).Format(time.RFC3339Nano)}}.Encode(), nil, http.StatusOK, &candles)
	wantPoints := []pagePoint{}
	for _, k := range candles.Candles {
		wantPoints = append(wantPoints, pagePoint{Start: jsonTime(t, k.Start), Close: k.Close, Volume: k.Volume})
	}
	if chart.Points == nil {
		chart.Points = []pagePoint{}
	}
	if len(wantPoints) == 0 || !reflect.DeepEqual(chart.Points, wantPoints) {
		t.Fatalf("the price chart (%s from %s) shows\n%+v\nthe API's candles\n%+v", chart.Interval, chart.From, chart.Points, wantPoints)
	}
}

// jsonTime is a time as the API writes it.
func jsonTime(t *testing.T, at time.Time) string {
	raw, err := json.Marshal(at)
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// shoot saves the page as it is to the path in $env (relative to the repository root), at laptop
// width or at a phone's, when the variable is set.
func shoot(t *testing.T, ctx context.Context, env string, phone bool) {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		return
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(repoRoot(t), path)
	}
	width, height, opts := int64(laptopWidth), int64(laptopHeight), []chromedp.EmulateViewportOption(nil)
	if phone {
		width, height, opts = phoneWidth, phoneHeight, []chromedp.EmulateViewportOption{chromedp.EmulateMobile, chromedp.EmulateScale(2)}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height, opts...)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("saved %s (%d×%d)", path, width, height)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(laptopWidth, laptopHeight)); err != nil {
		t.Fatal(err)
	}
}
