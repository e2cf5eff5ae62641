package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// eventRow is an outcome's row on an event page, as the page shows it.
type eventRow struct {
	Key    string `json:"key"`
	Market string `json:"market"`
	Href   string `json:"href"`
	Label  string `json:"label"`
	Width  string `json:"width"` // the bar's, in percent of its track
	Value  string `json:"value"` // the price next to the bar
	Basis  string `json:"basis"` // "mid" or "last"
	Text   string `json:"text"`  // what is written next to the bar
	Bid    string `json:"bid"`
	Ask    string `json:"ask"`
	Mid    string `json:"mid"`
	Last   string `json:"last"`
}

// eventsRow is a row of the events list.
type eventsRow struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Outcomes   string `json:"outcomes"`
	Resolution string `json:"resolution"`
}

const (
	readEventJS = `({sum: document.getElementById("mid-sum").dataset.sum, rows: [...document.querySelectorAll("#outcomes tbody tr")].map(tr => ({
		key: tr.dataset.outcome, market: tr.dataset.market, href: tr.querySelector("a").getAttribute("href"),
		label: tr.querySelector("a").textContent, width: tr.querySelector(".bar-fill").getAttribute("width"),
		value: tr.querySelector(".prob").dataset.value, basis: tr.querySelector(".prob").dataset.basis,
		text: tr.querySelector(".prob-value").textContent + " " + tr.querySelector(".basis").textContent,
		bid: tr.querySelector(".bid").textContent, ask: tr.querySelector(".ask").textContent,
		mid: tr.querySelector(".mid").textContent, last: tr.querySelector(".last").textContent}))})`
	readEventsJS = `[...document.querySelectorAll("#events tbody tr")].map(tr => ({id: tr.dataset.event,
		status: tr.querySelector(".status").textContent, outcomes: tr.querySelector(".outcome-labels").dataset.count,
		resolution: tr.querySelector(".resolution")?.dataset.resolution ?? ""}))`
)

// browserPage drives one tab: its actions fail the test, and await polls the page.
type browserPage struct {
	t   *testing.T
	ctx context.Context
	url string
}

func (p *browserPage) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *browserPage) eval(expr string, out any) {
	p.t.Helper()
	raw, err := chromedp.Run(p.ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", expr, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		p.t.Fatalf("reading %s: %v", raw, err)
	}
}

// await polls the page until expr is true, for at most 20 s: a live update arrives within about
// a second.
func (p *browserPage) await(what, expr string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		p.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

func (p *browserPage) open(path string, want int64) {
	p.t.Helper()
	resp, err := chromedp.RunResponse(p.ctx, chromedp.Navigate(p.url+path))
	if err != nil {
		p.t.Fatalf("opening %s: %v", path, err)
	}
	if resp.Status != want {
		p.t.Fatalf("%s answered %d, want %d", path, resp.Status, want)
	}
}

// awaitReload is await for a page that reloads itself meanwhile (a poll in the page ends with it).
func (p *browserPage) awaitReload(what, expr string) {
	p.t.Helper()
	poll.Wait(p.t, 20*time.Second, what, func() bool {
		ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](expr))
		return err == nil && ok
	})
}

// follow clicks a link and checks the page it leads to: its path, and 200.
func (p *browserPage) follow(what, link, path string) {
	p.t.Helper()
	resp, err := chromedp.RunResponse(p.ctx, chromedp.Click(chromedp.CSS(link)))
	if err != nil {
		p.t.Fatalf("following %s: %v", what, err)
	}
	if u, err := url.Parse(resp.URL); err != nil || u.Path != path || resp.Status != http.StatusOK {
		p.t.Fatalf("%s leads to %s (%d), want %s", what, resp.URL, resp.Status, path)
	}
}

// TestEventPagesInBrowser opens the events list and an event's page in Chromium without a key,
// checks that each outcome's bar, price and link and the sum of the mids are GET /event's, trades
// while the page is open and sees the bars follow without a reload, closes and resolves the
// event and sees its state, and gets a clear 404 for a bad id.
func TestEventPagesInBrowser(t *testing.T) {
	tg := exchangetest.StartDev(t)
	closes := time.Now().UTC().Add(60 * 24 * time.Hour).Truncate(time.Hour)
	var e apiserver.Event
	tg.Admin(t, "POST", "/admin/v1/events", map[string]any{"question": "Which city hosts the 2027 pmx community summit?",
		"description": "Resolves to the city the organisers announce on the summit's site before the close.",
		"category":    "community", "closesAt": closes, "resolvesAt": closes.Add(24 * time.Hour),
		"outcomes": []map[string]any{{"key": "lisbon", "label": "Lisbon"}, {"key": "porto", "label": "Porto"},
			{"key": "berlin", "label": "Berlin"}, {"key": "nairobi", "label": "Nairobi"}}}, http.StatusCreated, &e)
	var other apiserver.Event
	tg.Admin(t, "POST", "/admin/v1/events", map[string]any{"question": "Which band plays the summit's last night?", "category": "community",
		"outcomes": []map[string]any{{"key": "a", "label": "The Quorum"}, {"key": "b", "label": "Split Brain"}}}, http.StatusCreated, &other)
	lisbon, porto, berlin, nairobi := e.Outcomes[0].MarketID, e.Outcomes[1].MarketID, e.Outcomes[2].MarketID, e.Outcomes[3].MarketID
	alice, bob, carol := tg.NewAccount(t, "alice"), tg.NewAccount(t, "bob"), tg.NewAccount(t, "carol")
	// Every book two-sided (mids 41, 27, 20 and 10), two of them traded.
	alice.Place(t, lisbon, "BUY", "YES", 38, 50)
	bob.Place(t, lisbon, "BUY", "NO", 56, 40) // a YES ask at 44
	alice.Place(t, porto, "BUY", "YES", 24, 30)
	bob.Place(t, porto, "BUY", "NO", 70, 20) // a YES ask at 30
	carol.Place(t, porto, "BUY", "YES", 30, 5)
	alice.Place(t, berlin, "BUY", "YES", 18, 20)
	bob.Place(t, berlin, "BUY", "NO", 78, 25) // a YES ask at 22
	carol.Place(t, berlin, "BUY", "YES", 22, 4)
	alice.Place(t, nairobi, "BUY", "YES", 8, 10)
	bob.Place(t, nairobi, "BUY", "NO", 88, 10) // a YES ask at 12

	browser := startBrowser(t)
	ctx, cancel := context.WithTimeout(browser, 3*time.Minute)
	defer cancel()
	p := &browserPage{t: t, ctx: ctx, url: tg.URL}

	// The markets list links to the events.
	p.open("/markets", http.StatusOK)
	p.follow("the navigation to the events", "#nav-events", "/events")
	checkEvents(t, alice, p)
	p.await("the list to follow the feed", `document.getElementById("events").dataset.live === "true"`)
	tg.Admin(t, "POST", "/admin/v1/events/"+other.ID.String()+"/close", nil, http.StatusOK, nil)
	p.await("the list to show the closed event", fmt.Sprintf(`document.querySelector('tr[data-event="%s"] .status').dataset.status === "CLOSED"`, other.ID))
	checkEvents(t, alice, p)

	// The event's page: each outcome's bar, prices and link, and the sum, are GET /event's.
	p.open("/events/"+e.ID.String(), http.StatusOK)
	checkEvent(t, alice, e.ID, p)
	var facts map[string]string
	p.eval(`({question: document.getElementById("question").textContent, status: document.getElementById("status").textContent,
		closes: document.getElementById("closes-at").getAttribute("datetime")})`, &facts)
	if want := map[string]string{"question": e.Question, "status": "OPEN", "closes": jsonTime(t, closes)}; !reflect.DeepEqual(facts, want) {
		t.Fatalf("the event page shows %v, want %v", facts, want)
	}
	p.await("the row highlight-free page", `document.getElementById("mid-sum").dataset.sum === "98"`)
	shoot(t, ctx, "PMX_SCREENSHOT_EVENT", false)
	shoot(t, ctx, "PMX_SCREENSHOT_EVENT_PHONE", true)

	// Each outcome links to its market's page.
	p.follow("Porto's link", fmt.Sprintf(`#outcomes tr[data-market="%s"] a`, porto), "/markets/"+porto.String())
	var market apiserver.Market
	alice.Expect(t, "GET", "/market?marketId="+porto.String(), nil, http.StatusCreated, &market)
	var question string
	p.eval(`document.getElementById("question").textContent`, &question)
	if question != market.Question || market.OutcomeKey == nil || *market.OutcomeKey != "porto" {
		t.Fatalf("Porto's link leads to %q, the market of outcome %v (%q)", question, market.OutcomeKey, market.Question)
	}

	// Trading while the page is open: the bars follow without a reload.
	p.open("/events/"+e.ID.String(), http.StatusOK)
	checkEvent(t, alice, e.ID, p)
	p.run("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	lisbonRow := fmt.Sprintf(`document.querySelector('#outcomes tr[data-market="%s"]')`, lisbon)
	carol.Place(t, lisbon, "BUY", "YES", 44, 40) // takes every YES ask: the bar shows the last trade
	p.await("Lisbon's bar at its last trade", lisbonRow+`.querySelector(".bar-fill").getAttribute("width") === "44" && `+
		lisbonRow+`.querySelector(".prob").dataset.basis === "last"`)
	checkEvent(t, alice, e.ID, p)
	bob.Place(t, lisbon, "BUY", "NO", 53, 10) // a YES ask at 47: the mid again, (38+47)/2
	p.await("Lisbon's bar at its mid", lisbonRow+`.querySelector(".bar-fill").getAttribute("width") === "42.5" && `+
		lisbonRow+`.querySelector(".prob").dataset.basis === "mid"`)
	checkEvent(t, alice, e.ID, p)

	// Closing moves the page; resolving shows the outcome that won.
	tg.Admin(t, "POST", "/admin/v1/events/"+e.ID.String()+"/close", nil, http.StatusOK, nil)
	p.await("the event closed", `document.getElementById("status").dataset.status === "CLOSED"`)
	checkEvent(t, alice, e.ID, p)
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !ok {
		t.Fatalf("the page reloaded to follow the event (%v)", err)
	}
	tg.Admin(t, "POST", "/admin/v1/events/"+e.ID.String()+"/resolve", map[string]any{"outcome": "porto"}, http.StatusOK, nil)
	p.awaitReload("the event resolved", `document.getElementById("status").dataset.status === "RESOLVED" && `+
		`document.getElementById("resolution")?.dataset.resolution === "porto"`)
	var won []string
	p.eval(`[...document.querySelectorAll("#outcomes tr")].filter(tr => tr.querySelector(".won")).map(tr => tr.dataset.outcome)`, &won)
	var resolution string
	p.eval(`document.getElementById("resolution").textContent`, &resolution)
	if !reflect.DeepEqual(won, []string{"porto"}) || resolution != "won: Porto" {
		t.Fatalf("the resolved event marks %v as won and says %q", won, resolution)
	}
	p.open("/events", http.StatusOK)
	checkEvents(t, alice, p)

	// Both pages fit a phone's width.
	p.run("phone width", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile))
	for _, path := range []string{"/events", "/events/" + e.ID.String()} {
		p.open(path, http.StatusOK)
		if fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fitsJS)); err != nil || !fits {
			t.Fatalf("at %dpx %s is wider than the screen (%v)", phoneWidth, path, err)
		}
	}
	p.run("laptop width", chromedp.EmulateViewport(laptopWidth, laptopHeight))

	// A bad id, or a market's: a page that says so, and where to go.
	for _, id := range []string{"no-such-event", uuid.NewString(), lisbon.String()} {
		p.open("/events/"+url.PathEscape(id), http.StatusNotFound)
		var page map[string]string
		p.eval(`({title: document.querySelector("h1").textContent, error: document.getElementById("error").textContent,
			link: document.getElementById("to-list").getAttribute("href")})`, &page)
		if page["title"] != "No such event" || page["link"] != "/events" ||
			page["error"] != "No event has the id “"+id+"”. It may be mistyped; every event is listed on the events page." {
			t.Fatalf("the page for event %q says %v", id, page)
		}
	}
}

// checkEvents compares the events list on the page with GET /events: every event in its order,
// its status, its number of outcomes and the outcome it resolved to.
func checkEvents(t *testing.T, c *exchangetest.Client, p *browserPage) {
	t.Helper()
	var list struct {
		Events []apiserver.Event `json:"events"`
	}
	c.Expect(t, "GET", "/events", nil, http.StatusOK, &list)
	want := []eventsRow{}
	for _, e := range list.Events {
		row := eventsRow{ID: e.ID.String(), Status: e.Status, Outcomes: strconv.Itoa(len(e.Outcomes))}
		if e.Resolution != nil {
			row.Resolution = *e.Resolution
		}
		want = append(want, row)
	}
	// The page was rendered from a snapshot up to a second old, and has followed the feed since
	// (its script fetches a resolution's row): it shows GET /events's answer within seconds.
	var rows []eventsRow
	if err := poll.Until(p.ctx, 10*time.Second, func(context.Context) (bool, error) {
		p.eval(readEventsJS, &rows)
		return reflect.DeepEqual(rows, want), nil
	}); err != nil {
		t.Fatalf("the events list shows\n%+v\nGET /events\n%+v", rows, want)
	}
}

// checkEvent compares an event page with GET /event: each outcome's link, label, bid, ask, mid and
// last price, its bar (the mid while both sides of its book are there, the last trade's price
// while one is empty and it has traded, else the mid) and the sum of the mids. The page must have
// caught up with every outcome's book first, which each row's seq says.
func checkEvent(t *testing.T, c *exchangetest.Client, id uuid.UUID, p *browserPage) {
	t.Helper()
	var d apiserver.EventDetail
	c.Expect(t, "GET", "/event?eventId="+id.String(), nil, http.StatusOK, &d)
	want := struct {
		Sum  string     `json:"sum"`
		Rows []eventRow `json:"rows"`
	}{Sum: num(d.YesMidSum)}
	for _, o := range d.Outcomes {
		seq := c.Book(t, o.MarketID).Seq
		p.await("the page to catch up with "+o.Key+"'s book", fmt.Sprintf(`(tr => tr.dataset.live === "true" && +tr.dataset.seq >= %d)(document.querySelector('#outcomes tr[data-market="%s"]'))`, seq, o.MarketID))
		value, basis := o.YesMid, "mid"
		if (o.BestBid == nil || o.BestAsk == nil) && o.LastPrice != nil {
			value, basis = float64(*o.LastPrice), "last"
		}
		text := num(value) + "¢ mid"
		if basis == "last" {
			text = num(value) + "¢ last trade"
		}
		want.Rows = append(want.Rows, eventRow{Key: o.Key, Market: o.MarketID.String(), Href: "/markets/" + o.MarketID.String(),
			Label: o.Label, Width: num(value), Value: num(value), Basis: basis, Text: text,
			Bid: cents(o.BestBid), Ask: cents(o.BestAsk), Mid: num(o.YesMid) + "¢", Last: cents(o.LastPrice)})
	}
	var got struct {
		Sum  string     `json:"sum"`
		Rows []eventRow `json:"rows"`
	}
	p.eval(readEventJS, &got)
	if !reflect.DeepEqual(got.Sum, want.Sum) || !reflect.DeepEqual(got.Rows, want.Rows) {
		t.Fatalf("the event page shows\n%+v\nGET /event\n%+v", got, want)
	}
}

// num writes a price as the page does: a whole number, or with its half.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func cents(p *int) string {
	if p == nil {
		return "—"
	}
	return strconv.Itoa(*p) + "¢"
}
