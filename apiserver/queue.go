package apiserver

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
)

// maxQueuePositions bounds the orders of one GET /orders/queue-positions.
const maxQueuePositions = 100

// QueuePositionError is one order of GET /orders/queue-positions that has no position, and why:
// what GET /order/queue-position would have answered for it.
type QueuePositionError struct {
	OrderID uuid.UUID            `json:"orderId"`
	Error   string               `json:"error"`
	Details httpkit.ErrorDetails `json:"details"`
}

// queuePosition answers where one of the caller's resting orders stands in its level's queue, as
// its shard's book stands when it answers. The order's market comes from the order cache, else a
// read, as a cancel's does; the shard decides whether it is the caller's and resting.
func (s *Server) queuePosition(c *gin.Context) error {
	id, err := queryUUID(c, "orderId")
	if err != nil {
		return err
	}
	f, err := s.orderFacts(c.Request.Context(), id)
	if err != nil {
		return err
	}
	res := s.cfg.Exchange.QueuePositions(c.Request.Context(), accountOf(c), []exchange.OrderRef{{Market: f.market, Seq: f.seq}})[0]
	if res.Err != nil {
		return queueRefusal(res.Err)
	}
	c.JSON(http.StatusOK, queuePositionOf(id, f.market, res.Position))
	return nil
}

// queuePositions answers queuePosition for up to maxQueuePositions orders at once, each order
// spending a read of the account's rate limit: {"positions": [...], "errors": [...]}, the
// positions in the order the ids were given, and each order without one in errors, with what GET
// /order/queue-position would have answered for it.
func (s *Server) queuePositions(c *gin.Context) error {
	raw, ok := c.GetQuery("orderIds")
	if !ok || raw == "" {
		return httpkit.FieldError("orderIds", "missing_field", "the query parameter orderIds is required: from 1 to %d order ids, separated by commas", maxQueuePositions)
	}
	parts := strings.Split(raw, ",")
	if len(parts) > maxQueuePositions {
		return httpkit.FieldError("orderIds", "invalid_value", "orderIds names %d orders, and at most %d may be asked at once", len(parts), maxQueuePositions)
	}
	ids := make([]uuid.UUID, len(parts))
	for i, p := range parts {
		id, err := parseUUID("orderIds", p)
		if err != nil {
			return err
		}
		if slices.Contains(ids[:i], id) {
			return httpkit.FieldError("orderIds", "invalid_value", "orderIds names the order %s twice", id)
		}
		ids[i] = id
	}
	if err := s.charge(c, ratelimit.Read, float64(len(ids)-1)); err != nil {
		return err
	}
	ctx := c.Request.Context()
	errs := []QueuePositionError{}
	fail := func(id uuid.UUID, err error) {
		e := errorAnswer(c, queueRefusal(err))
		errs = append(errs, QueuePositionError{OrderID: id, Error: e.Message, Details: httpkit.ErrorDetails{Code: e.Code, Field: e.Field}})
	}
	var refs []exchange.OrderRef
	var asked []uuid.UUID
	for _, id := range ids {
		f, err := s.orderFacts(ctx, id)
		if err != nil {
			if errors.Is(err, errOrderNotFound) {
				fail(id, err)
				continue
			}
			return err
		}
		refs, asked = append(refs, exchange.OrderRef{Market: f.market, Seq: f.seq}), append(asked, id)
	}
	positions := []QueuePosition{}
	if len(refs) > 0 {
		for i, res := range s.cfg.Exchange.QueuePositions(ctx, accountOf(c), refs) {
			if res.Err != nil {
				fail(asked[i], res.Err)
				continue
			}
			positions = append(positions, queuePositionOf(asked[i], refs[i].Market, res.Position))
		}
	}
	c.JSON(http.StatusOK, gin.H{"positions": positions, "errors": errs})
	return nil
}

// queueRefusal answers an order that rests no more 409 order_not_open: a read of a state that
// has passed, where a cancel's 400 refuses a write.
func queueRefusal(err error) error {
	var refusal *domain.Error
	if errors.As(err, &refusal) && refusal.Code == domain.ErrOrderNotOpen.Code {
		return &httpkit.Error{Status: http.StatusConflict, Code: refusal.Code, Field: refusal.Field, Message: refusal.Message}
	}
	return err
}

func queuePositionOf(id, market uuid.UUID, p exchange.QueuePosition) QueuePosition {
	return QueuePosition{OrderID: id, MarketID: market, Side: p.Side.String(), Outcome: p.Outcome.String(), Price: p.Price,
		AheadQuantity: p.Ahead, LevelQuantity: p.Level}
}
