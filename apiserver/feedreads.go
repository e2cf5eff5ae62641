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

// accountFeedMessages lists the account's feed messages after a sequence number, oldest first (package
// feed), with the feed's last number: the seq to follow on from.
func (s *Server) accountFeedMessages(c *gin.Context) error {
	after, err := queryAfter(c)
	if err != nil {
		return err
	}
	limit, err := queryLimit(c, defaultFeedMessages, maxFeedMessages)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	account := accountOf(c)
	first, last, err := s.cfg.Store.AccountFeed(ctx, account)
	if err != nil {
		return err
	}
	if after > last {
		return errAfterLast(after, last, "your account's")
	}
	events := []feed.AccountEvent{}
	if after < last {
		if first == 0 || after+1 < first {
			return errAccountResyncRequired
		}
		batches, err := s.feedLog().AccountEventsAfter(ctx, account, after, limit)
		if err != nil {
			return err
		}
		if events, err = feed.AccountPage(batches, after, limit); err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, gin.H{"seq": last, "events": events})
	return nil
}

var errAccountResyncRequired = &httpkit.Error{Status: http.StatusGone, Code: "resync_required", Field: "after",
	Message: "the events after this number are no longer kept: read your orders, positions and account (GET /orders, /positions, /account), then follow the events after the seq GET /account/events gives"}

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
