package apiserver

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// The public reads of events: GET /events lists them from Postgres; GET /event reads one with
// each outcome's book top, taken from the shard that owns the outcome's market as GET
// /market/order-book takes it, so that an event's prices and its markets' books never disagree.
// In distributed mode the router reads all the outcomes' books at once (exchange.BooksReader):
// their owners in one query, and one call per shard, so that an event of 50 outcomes costs what
// one of 2 does. ReadEvent is exported for the event pages, as ReadMarket is for the market ones.

// EventDetail and OutcomeDetail (GET /event's answer and its outcomes) are in package apijson, which
// the event pages share.
type (
	EventDetail   = apijson.EventDetail
	OutcomeDetail = apijson.OutcomeDetail
)

// YesMid is the middle of the range a market's book leaves open for the YES price: (bid + ask) / 2,
// where a side with no order counts at its bound, a missing bid as 0 (nobody pays anything for
// YES) and a missing ask as 100 (nobody sells YES below what it can pay). So a one-sided book's
// mid is halfway from its best price to the bound, and an empty book's is 50, whatever its last
// trade: a mid says what the book offers now. It is a whole number or a half.
func YesMid(bid, ask *int) float64 {
	lo, hi := 0, engine.Payout
	if bid != nil {
		lo = *bid
	}
	if ask != nil {
		hi = *ask
	}
	return float64(lo+hi) / 2
}

// readOrderBooks reads the books of markets, in their order, in one call of the exchange
// (exchange.BooksReader): the router asks each owning shard once, a process's shards read their
// memory.
func (s *Server) readOrderBooks(ctx context.Context, ids []uuid.UUID) ([]OrderBook, error) {
	snaps, err := s.cfg.Exchange.OrderBooks(ctx, ids)
	if err != nil {
		return nil, err
	}
	books := make([]OrderBook, len(snaps))
	for i, snap := range snaps {
		books[i] = orderBookOf(snap)
	}
	return books, nil
}

// ReadEvent reads an event and each outcome's book top; store.ErrNotFound when there is none.
func (s *Server) ReadEvent(ctx context.Context, id uuid.UUID) (EventDetail, error) {
	e, err := s.cfg.Store.Event(ctx, id)
	if err != nil {
		return EventDetail{}, err
	}
	ids := make([]uuid.UUID, len(e.Outcomes))
	for i, o := range e.Outcomes {
		ids[i] = o.MarketID
	}
	books, err := s.readOrderBooks(ctx, ids)
	if err != nil {
		return EventDetail{}, err
	}
	d := EventDetail{EventHeader: apijson.EventHeaderOf(&e), Outcomes: make([]OutcomeDetail, len(e.Outcomes))}
	for i, o := range e.Outcomes {
		out := &d.Outcomes[i]
		*out = OutcomeDetail{Key: o.Key, Label: o.Label, MarketID: o.MarketID}
		book := &books[i]
		if len(book.Yes.Bids) > 0 {
			out.BestBid = &book.Yes.Bids[0].Price
		}
		if len(book.Yes.Asks) > 0 {
			out.BestAsk = &book.Yes.Asks[0].Price
		}
		out.LastPrice = book.Yes.LastTradePrice
		out.YesMid = YesMid(out.BestBid, out.BestAsk)
		d.YesMidSum += out.YesMid
	}
	return d, nil
}

// listEvents lists events, newest first (by createdAt), optionally of one status, in cursor
// pages as GET /orders does.
func (s *Server) listEvents(c *gin.Context) error {
	var status domain.MarketStatus // "" for all
	if v, given := c.GetQuery("status"); given {
		var ok bool
		if status, ok = domain.ParseMarketStatus(v); !ok {
			return httpkit.FieldError("status", "invalid_value", "status must be one of OPEN, CLOSED, RESOLVED, CANCELED")
		}
	}
	after, limit, err := queryPage(c, "GET /events", defaultMarkets, maxMarkets)
	if err != nil {
		return err
	}
	var afterAt time.Time
	var afterID uuid.UUID
	if after != nil {
		afterAt, afterID = after.CreatedAt, after.ID
	}
	events, err := s.cfg.Store.EventsPage(c.Request.Context(), status, afterAt, afterID, limit)
	if err != nil {
		return err
	}
	next := nextCursor(events, limit, func(e *records.Event) store.Cursor { return store.Cursor{CreatedAt: e.CreatedAt, ID: e.ID} })
	c.JSON(http.StatusOK, gin.H{"events": listOf(events, EventOf), "nextCursor": next})
	return nil
}

var errEventNotFound = &httpkit.Error{Status: http.StatusNotFound, Code: "event_not_found", Field: "eventId",
	Message: "no event has this id: GET /events lists them"}

// getEvent reads one event with its outcomes' prices. 200, not GET /market's 201: that one is
// the contract's, and the contract has no events.
func (s *Server) getEvent(c *gin.Context) error {
	id, err := queryUUID(c, "eventId")
	if err != nil {
		return err
	}
	d, err := s.ReadEvent(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return errEventNotFound
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, d)
	return nil
}
