package marketpages

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/store"
)

// The event pages: /events, every event with its status and outcomes, newest first, as GET
// /events lists them; and /events/{id}, an event's outcomes with each one's YES price as a
// probability bar, its book top and last price, as GET /event answers, linking to each outcome's
// market page. An outcome is a market, so the event page follows each outcome's book channel on
// the public feed (its best bid and ask, last trade and status), as a market page does its one;
// the list follows lifecycle, whose status messages name the event of an event's markets.

// eventsPage is how many events a page of the list shows, newest first.
const eventsPage = 50

type eventsView struct {
	Rows []eventsRow
	Next string // the next page's URL; "" on the last
}

// eventsRow is an event as GET /events lists it, and the outcome it resolved to.
type eventsRow struct {
	apijson.Event
	Winner    string // the resolution's outcome label; "" unless RESOLVED
	WinnerKey string // and its key
}

// winner is the outcome an event resolved to: its label and key, or "" and "".
func winner(resolution *string, outcomes []apijson.EventOutcome) (label, key string) {
	for _, o := range outcomes {
		if resolution != nil && *resolution == o.Key {
			return o.Label, o.Key
		}
	}
	return "", ""
}

// eventList shows a page of the events, newest first, from the page's snapshot (eventListing),
// shared as the markets list's pages are.
func (p *pages) eventList(c *gin.Context) {
	after, ok := pageCursor(c)
	if !ok {
		p.render(c, http.StatusBadRequest, "message.html", &view{Title: "No such page", Section: "events",
			Error: "This page of the list has a broken address. Start again from the newest events."})
		return
	}
	v, err := p.events.get(c.Request.Context(), after)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.render(c, http.StatusOK, "events.html", &view{Title: "Events", Script: "events.js", Section: "events", Events: v})
}

// pageCursor reads a list page's cursor (?before=&beforeId=, the last row of the page before);
// nil for the first page, false for a broken one.
func pageCursor(c *gin.Context) (*store.Cursor, bool) {
	v := c.Query("before")
	if v == "" {
		return nil, true
	}
	at, terr := time.Parse(time.RFC3339Nano, v)
	id, ierr := uuid.Parse(c.Query("beforeId"))
	if terr != nil || ierr != nil || !domain.TimeInRange(at) { // the API's bound on times: domain.CheckTime
		return nil, false
	}
	return &store.Cursor{CreatedAt: at, ID: id}, true
}

// eventListing reads a page of the events list.
func (p *pages) eventListing(ctx context.Context, after *store.Cursor) (*eventsView, error) {
	var afterAt time.Time
	var afterID uuid.UUID
	if after != nil {
		afterAt, afterID = after.CreatedAt, after.ID
	}
	rows, err := p.cfg.Store.EventsPage(ctx, "", afterAt, afterID, eventsPage+1)
	if err != nil {
		return nil, err
	}
	v := &eventsView{}
	if len(rows) > eventsPage {
		rows = rows[:eventsPage]
		last := rows[len(rows)-1]
		v.Next = "/events?" + url.Values{"before": {last.CreatedAt.UTC().Format(time.RFC3339Nano)}, "beforeId": {last.ID.String()}}.Encode()
	}
	for i := range rows {
		r := eventsRow{Event: apijson.EventOf(&rows[i])}
		r.Winner, r.WinnerKey = winner(r.Resolution, r.Outcomes)
		v.Rows = append(v.Rows, r)
	}
	return v, nil
}

// eventView is an event page's: GET /event's answer, which is also the JSON its script starts
// from, and the label of the outcome it resolved to.
type eventView struct {
	apijson.EventDetail
	Winner    string // the resolution's outcome label; "" unless RESOLVED
	WinnerKey string // and its key
}

// event shows one event.
func (p *pages) event(c *gin.Context) {
	raw := c.Param("id")
	id, err := uuid.Parse(raw)
	if err != nil {
		p.eventNotFound(c, raw)
		return
	}
	d, err := p.cfg.Reads.ReadEvent(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		p.eventNotFound(c, raw)
		return
	}
	if err != nil {
		p.fail(c, err)
		return
	}
	v := &eventView{EventDetail: d}
	for _, o := range d.Outcomes {
		if d.Resolution != nil && *d.Resolution == o.Key {
			v.Winner, v.WinnerKey = o.Label, o.Key
		}
	}
	p.render(c, http.StatusOK, "event.html", &view{Title: d.Question, Script: "event.js", Section: "events", Data: d, Event: v})
}

// eventNotFound answers an id that is no event's with a page that says so.
func (p *pages) eventNotFound(c *gin.Context, id string) {
	p.render(c, http.StatusNotFound, "message.html", &view{Title: "No such event", Section: "events",
		Error: "No event has the id “" + id + "”. It may be mistyped; every event is listed on the events page."})
}

// mid shows a YES mid (a whole number of cents or a half) in cents.
func mid(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "¢" }
