package marketpages_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
)

// newEvent lists an event through the admin API, with an outcome for each label.
func newEvent(t *testing.T, tg *exchangetest.Target, question string, labels ...string) apiserver.Event {
	t.Helper()
	outcomes := make([]map[string]any, len(labels))
	for i, l := range labels {
		outcomes[i] = map[string]any{"key": string(rune('a' + i)), "label": l}
	}
	var e apiserver.Event
	tg.Admin(t, "POST", "/admin/v1/events", map[string]any{"question": question, "category": "meta", "outcomes": outcomes},
		http.StatusCreated, &e)
	return e
}

// TestEventPages serves the events list, an event and the refusals over real HTTP, without a key:
// the outcomes' links, prices and sum as GET /event answers, text escaped, and the pages' headers.
func TestEventPages(t *testing.T) {
	tg := exchangetest.StartDev(t)
	e := newEvent(t, tg, "Which <i>tag</i> & quote \" stays text?", "<b>bold</b>", "Plain", "Third")
	alice, bob := tg.NewAccount(t, "alice"), tg.NewAccount(t, "bob")
	alice.Place(t, e.Outcomes[0].MarketID, "BUY", "YES", 40, 10)
	bob.Place(t, e.Outcomes[0].MarketID, "BUY", "NO", 55, 3) // a YES ask at 45
	alice.Place(t, e.Outcomes[1].MarketID, "BUY", "YES", 30, 5)

	status, h, body := get(t, tg, "/events")
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /events: %d %s", status, h.Get("Content-Type"))
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Fatalf("GET /events: Content-Security-Policy %q", csp)
	}
	for _, want := range []string{`data-event="` + e.ID.String() + `"`, `href="/events/` + e.ID.String() + `"`,
		"Which &lt;i&gt;tag&lt;/i&gt; &amp; quote &#34; stays text?", "&lt;b&gt;bold&lt;/b&gt;, Plain, Third", `data-status="OPEN"`,
		`href="/events" id="nav-events" aria-current="page"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("GET /events does not hold %s:\n%s", want, body)
		}
	}
	if _, _, markets := get(t, tg, "/markets"); !strings.Contains(markets, `href="/events" id="nav-events"`) {
		t.Fatalf("the markets list does not link to the events:\n%s", markets)
	}

	status, h, body = get(t, tg, "/events/"+e.ID.String())
	if status != http.StatusOK || h.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("GET /events/{id}: %d, X-Frame-Options %q", status, h.Get("X-Frame-Options"))
	}
	// The outcomes' mids: (40+45)/2, (30+100)/2 and (0+100)/2.
	for _, want := range []string{`id="page-data"`, `"yesMidSum":157.5`, `data-sum="157.5"`, "157.5¢", `id="outcomes"`,
		`href="/markets/` + e.Outcomes[0].MarketID.String() + `"`, `href="/markets/` + e.Outcomes[1].MarketID.String() + `"`,
		"42.5¢", "65¢", "&lt;b&gt;bold&lt;/b&gt;", "Which &lt;i&gt;tag&lt;/i&gt;"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the event page does not hold %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<b>bold</b>") || strings.Contains(body, "<i>tag</i>") {
		t.Fatal("the event page shows an outcome's or the question's markup unescaped")
	}
	// An outcome's market page leads back to its event; a lone market's leads to none.
	if _, _, page := get(t, tg, "/markets/"+e.Outcomes[1].MarketID.String()); !strings.Contains(page, `href="/events/`+e.ID.String()+`" id="event-link"`) {
		t.Fatalf("an outcome's market page does not link to its event:\n%s", page)
	}
	if _, _, page := get(t, tg, "/markets/"+tg.NewMarket(t, nil).ID.String()); strings.Contains(page, `id="event-link"`) {
		t.Fatalf("a market of no event links to an event:\n%s", page)
	}

	for _, id := range []string{"not-an-event", uuid.NewString(), e.Outcomes[0].MarketID.String()} {
		status, _, body := get(t, tg, "/events/"+id)
		if status != http.StatusNotFound || !strings.Contains(body, "No event has the id") || !strings.Contains(body, `href="/events" id="to-list"`) {
			t.Fatalf("GET /events/%s: %d\n%s", id, status, body)
		}
	}
	if status, _, body := get(t, tg, "/events?before=yesterday&beforeId=x"); status != http.StatusBadRequest || !strings.Contains(body, "newest events") {
		t.Fatalf("a broken page of the events list: %d\n%s", status, body)
	}
}
