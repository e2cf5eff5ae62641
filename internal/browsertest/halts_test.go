package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
)

// holdFeedJS, run before a page's scripts, sends the page's WebSocket elsewhere (a path that
// answers 404, so that it fails and the page retries) while window.pmxHoldFeed is true: the test
// lets the page connect when it chooses.
const holdFeedJS = `(() => {
	const Real = window.WebSocket;
	window.pmxHoldFeed = true;
	function Held(url, protocols) {
		return new Real(window.pmxHoldFeed ? url.replace("/api/v1/ws/public", "/api/v1/ws/held") : url, protocols);
	}
	Held.CONNECTING = Real.CONNECTING; Held.OPEN = Real.OPEN; Held.CLOSING = Real.CLOSING; Held.CLOSED = Real.CLOSED;
	window.WebSocket = Held;
})();`

// haltedJS is true when the page's halted badge says by what trading is halted, shown, or is
// hidden for "".
func haltedJS(by string) string {
	return fmt.Sprintf(`(() => { const b = document.getElementById("halted");
		return b.dataset.halted === %[1]q && b.classList.contains("hidden") === (%[1]q === "") && (%[1]q === "" || b.textContent === "halted (%[1]s)"); })()`, by)
}

// TestHaltBadgeLive opens a market's page and an event's page in Chromium and halts and resumes
// trading through the admin API while each is open: the halted badge follows the feed's lifecycle
// channel without a reload — the market's own pause, the exchange's halt over it and back, the
// resume; on the event's page the event's pause, which one outcome's own pause does not show. A
// pause the feed told before the page subscribed (no message will come) shows all the same: the
// page reads itself again once subscribed.
func TestHaltBadgeLive(t *testing.T) {
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, map[string]any{"question": "Will the Lisbon marathon record fall in 2027?", "category": "sport"})
	var e apiserver.Event
	tg.Admin(t, "POST", "/admin/v1/events", map[string]any{"question": "Who opens the 2027 pmx summit?", "category": "community",
		"outcomes": []map[string]any{{"key": "ana", "label": "Ana"}, {"key": "rui", "label": "Rui"}}}, http.StatusCreated, &e)
	setHalt := func(halted bool) {
		t.Helper()
		tg.Admin(t, "PUT", "/admin/v1/halt", map[string]any{"halted": halted}, http.StatusOK, nil)
	}
	pauseEvent := func(action string) {
		t.Helper()
		tg.Admin(t, "POST", "/admin/v1/events/"+e.ID.String()+"/"+action, nil, http.StatusOK, nil)
	}

	browser := startBrowser(t)
	ctx, cancel := context.WithTimeout(browser, 3*time.Minute)
	defer cancel()
	p := &browserPage{t: t, ctx: ctx, url: tg.URL}
	// live opens a page and waits until its badge follows the feed (the lifecycle subscription
	// confirmed and the page read again), so that every change after it reaches the page.
	live := func(path string) {
		t.Helper()
		p.open(path, http.StatusOK)
		p.run("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
		p.await("the badge to follow the feed", `document.getElementById("halted").dataset.live === "true"`)
		p.await("no badge while it trades", haltedJS(""))
	}
	notReloaded := func() {
		t.Helper()
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !ok {
			t.Fatalf("the page reloaded to follow the halts (%v)", err)
		}
	}

	live("/markets/" + m.ID.String())
	tg.Markets.Pause(t, m.ID, true)
	p.await("the market's pause", haltedJS("market"))
	setHalt(true)
	p.await("the exchange's halt, the widest", haltedJS("exchange"))
	setHalt(false)
	p.await("the market's own pause again", haltedJS("market"))
	tg.Markets.Pause(t, m.ID, false)
	p.await("the market resumed", haltedJS(""))
	notReloaded()

	live("/events/" + e.ID.String())
	pauseEvent("pause")
	p.await("the event's pause", haltedJS("event"))
	tg.Markets.Pause(t, e.Outcomes[0].MarketID, true) // an outcome's own pause halts that market, not the event
	pauseEvent("resume")
	p.await("the event resumed", haltedJS(""))
	setHalt(true)
	p.await("the exchange's halt", haltedJS("exchange"))
	setHalt(false)
	p.await("the exchange's halt lifted", haltedJS(""))
	notReloaded()
	// The outcome's page, opened now, shows its own pause as the server renders it, and follows.
	live2 := "/markets/" + e.Outcomes[0].MarketID.String()
	p.open(live2, http.StatusOK)
	p.await("the outcome's own pause, rendered", haltedJS("market"))
	p.await("the badge to follow the feed", `document.getElementById("halted").dataset.live === "true"`)
	tg.Markets.Pause(t, e.Outcomes[0].MarketID, false)
	p.await("the outcome resumed", haltedJS(""))

	// The market paused between the page's render and its lifecycle subscription: the page's feed
	// is held off until the hub has told the pause (to another subscriber), so no message of it
	// will reach the page.
	hold, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: holdFeedJS})
	if err != nil {
		t.Fatal(err)
	}
	p.open("/markets/"+m.ID.String(), http.StatusOK)
	p.await("the page's feed held off", `document.getElementById("live").dataset.state === "reconnecting"`)
	watch := tg.DialPublicFeed(t)
	watch.Send(t, map[string]any{"op": "subscribe", "channel": "lifecycle"})
	watch.ExpectReply(t, "subscribed", "")
	tg.Markets.Pause(t, m.ID, true)
	for n := 0; ; n++ {
		msg := watch.Next(t, 30*time.Second)
		if msg.Type == "market" && msg.MarketID == m.ID.String() && msg.Halted == "market" {
			break
		}
		if n == 100 {
			t.Fatalf("the lifecycle channel did not tell the market's pause (last: %s)", msg.Raw)
		}
	}
	p.await("the badge as rendered before the pause", haltedJS(""))
	p.run("let the page's feed connect", chromedp.Evaluate[chromedp.Void](`window.pmxHoldFeed = false`))
	p.await("the pause told before the page subscribed", haltedJS("market"))
	if _, err := chromedp.Call(ctx, page.RemoveScriptToEvaluateOnNewDocument, page.RemoveScriptToEvaluateOnNewDocumentParams(hold)); err != nil {
		t.Fatal(err)
	}
}
