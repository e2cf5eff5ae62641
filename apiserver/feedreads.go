package apiserver

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
)

// Limits of a listing of feed messages (GET /market/events, GET /account/events).
const (
	defaultFeedMessages = 100
	maxFeedMessages     = 1000
)

var errResyncRequired = &httpkit.Error{Status: http.StatusGone, Code: "resync_required", Field: "after",
	Message: "the events after this number are no longer kept: read the book (GET /market/order-book, which says its seq) and follow the events after that"}

// marketFeedMessages lists a market's feed messages after a sequence number, oldest first (package feed).
// The messages are read from Postgres as the shard wrote them; a reader further behind than the
// retention must resync from a snapshot.
func (s *Server) marketFeedMessages(c *gin.Context) error {
	id, err := queryUUID(c, "marketId")
	if err != nil {
		return err
	}
	after, err := queryAfter(c)
	if err != nil {
		return err
	}
	limit, err := queryLimit(c, defaultFeedMessages, maxFeedMessages)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	m, err := s.cfg.Store.Market(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return domain.ErrUnknownMarket
	}
	if err != nil {
		return err
	}
	if after > m.EventSeq {
		return errAfterLast(after, m.EventSeq, "the market's")
	}
	events := []feed.Event{}
	if after < m.EventSeq {
		first, err := s.cfg.Store.FirstEvent(ctx, id)
		if err != nil {
			return err
		}
		if first == 0 || after+1 < first {
			return errResyncRequired
		}
		batches, err := s.feedLog().EventsAfter(ctx, id, after, limit)
		if err != nil {
			return err
		}
		if events, err = feed.MarketPage(batches, after, limit); err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, gin.H{"marketId": id, "events": events})
	return nil
}

// accountFeedMessages lists the account's feed messages after a cursor (without one, from the
// oldest kept), merged across the feed's streams in commit order (package feed), with the cursor
// after them: what to follow on from.
func (s *Server) accountFeedMessages(c *gin.Context) error {
	v, given := c.GetQuery("after")
	after := feed.Cursor{}
	if given {
		var err *httpkit.Error
		if after, err = parseCursor("after", v); err != nil {
			return err
		}
	}
	limit, err := queryLimit(c, defaultFeedMessages, maxFeedMessages)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	account := accountOf(c)
	streams, err := s.feedLog().AccountFeed(ctx, account)
	if err != nil {
		return err
	}
	end := feed.FeedEnd(streams)
	if !given {
		after = feed.OldestKept(streams)
	}
	if !end.Covers(after) {
		return httpkit.FieldError("after", "out_of_range", "after is past your account's last event: give a cursor the feed gave you")
	}
	events, next := []feed.AccountEvent{}, after
	if !after.Covers(end) {
		if err := feed.CheckKept(streams, after); err != nil {
			return errAccountResyncRequired
		}
		batches, err := s.feedLog().AccountEventsAfter(ctx, account, after, limit, nil)
		if err != nil {
			return err
		}
		if events, next, err = feed.AccountPage(batches, after, limit, nil); err != nil {
			return err
		}
	}
	if len(events) < limit {
		// The page holds every event up to the end read before it, and perhaps some after.
		for h, seq := range end {
			next.Advance(h, seq)
		}
	}
	body := gin.H{"cursor": next.String(), "events": events}
	if next.Only("") {
		body["seq"] = next.Seq("") // the feed's first form, while the feed is its one stream
	}
	c.JSON(http.StatusOK, body)
	return nil
}

// parseCursor reads a cursor of the account's feed a client sends as field (after, resumeFrom):
// outdated_cursor names the feed's first form, a seq, invalid_cursor anything else not a cursor.
func parseCursor(field, v string) (feed.Cursor, *httpkit.Error) {
	c, err := feed.ParseCursor(v)
	switch {
	case errors.Is(err, feed.ErrCursorOutdated):
		return nil, &httpkit.Error{Status: http.StatusBadRequest, Code: "outdated_cursor", Field: field, Message: err.Error()}
	case err != nil:
		return nil, &httpkit.Error{Status: http.StatusBadRequest, Code: "invalid_cursor", Field: field, Message: err.Error()}
	}
	return c, nil
}

var errAccountResyncRequired = &httpkit.Error{Status: http.StatusGone, Code: "resync_required", Field: "after",
	Message: "the events after this cursor are no longer kept: read your orders, positions and account (GET /orders, /positions, /account), then follow on from the cursor a subscription of the orders channel without resumeFrom confirms, or page through GET /account/events from the oldest event kept (without after)"}

// errAfterLast refuses an after past a feed's last seq. Feed messages reach clients only once
// committed, and the last seq is read from Postgres, so no client has seen such a number (it may
// hold one of another market, account or database).
func errAfterLast(after, last int64, whose string) error {
	return httpkit.FieldError("after", "out_of_range", "after %d is past %s last event, seq %d: give a seq you have seen", after, whose, last)
}

// queryAfter reads the optional after parameter of a listing of feed messages: a seq the client has seen.
func queryAfter(c *gin.Context) (int64, error) {
	v, ok := c.GetQuery("after")
	if !ok {
		return 0, nil
	}
	after, err := strconv.ParseInt(v, 10, 64)
	if err != nil || after < 0 {
		return 0, httpkit.FieldError("after", "out_of_range", "after must be a whole number from 0 (a seq the client has seen)")
	}
	return after, nil
}
