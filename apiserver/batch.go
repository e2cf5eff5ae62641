package apiserver

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
	"github.com/pmx-dev/pmx/internal/records"
)

// The batch calls: placements and cancels many at once, each answered on its own.

// Batch limits.
const (
	maxBatchOrders  = 20
	maxBatchCancels = 100
)

// BatchResult is one placement's answer in POST /orders/batch: its status and either the order or
// the error, as POST /order would answer it alone.
type BatchResult struct {
	Status  int                   `json:"status"`
	Order   any                   `json:"order,omitempty"`
	Error   string                `json:"error,omitempty"`
	Details *httpkit.ErrorDetails `json:"details,omitempty"`
}

// CancelError is one order a batch cancel could not cancel, and why.
type CancelError struct {
	OrderID uuid.UUID            `json:"orderId"`
	Error   string               `json:"error"`
	Details httpkit.ErrorDetails `json:"details"`
}

func failed(c *gin.Context, err error) BatchResult {
	e := errorAnswer(c, err)
	return BatchResult{Status: e.Status, Error: e.Message, Details: &httpkit.ErrorDetails{Code: e.Code, Field: e.Field}}
}

// elements reads a field that must be a JSON array of lo to hi elements.
func (o object) elements(field string, lo, hi int) ([]json.RawMessage, error) {
	v, err := o.raw(field)
	if err != nil {
		return nil, err
	}
	var elems []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &elems) != nil {
		return nil, httpkit.FieldError(field, "invalid_type", "%s must be an array", field)
	}
	if len(elems) < lo || len(elems) > hi {
		return nil, httpkit.FieldError(field, "out_of_range", "%s must hold %d to %d elements, not %d", field, lo, hi, len(elems))
	}
	return elems, nil
}

// placeBatch places 1 to 20 orders, each exactly as POST /order takes it and answered as it
// would be alone, in request order; one refused does not refuse the others. Each market's
// placements run together in one batch of its shard, in request order.
func (s *Server) placeBatch(c *gin.Context) error {
	obj, err := readObject(c.Request) // a repeated key anywhere in the body refuses all of it
	if err != nil {
		return err
	}
	elems, err := obj.elements("orders", 1, maxBatchOrders)
	if err != nil {
		return err
	}
	if err := s.charge(c, ratelimit.Write, float64(len(elems)-1)); err != nil { // the request paid for one
		return err
	}
	ctx, account, now := c.Request.Context(), accountOf(c), time.Now()
	results := make([]BatchResult, len(elems))
	reqs := make([]orderRequest, len(elems))
	var todo []int // the placements to send, by index
	for i, el := range elems {
		var o object
		if json.Unmarshal(el, &o) != nil || o == nil {
			results[i] = failed(c, httpkit.FieldError("orders", "invalid_type", "orders[%d] must be a JSON object", i))
			continue
		}
		if reqs[i], err = o.order(s.cfg.MaxQuantity, now); err != nil {
			results[i] = failed(c, err)
			continue
		}
		if reqs[i].ClientOrderID != "" {
			replayed, err := s.replay(ctx, account, &reqs[i])
			if err != nil || replayed != nil {
				results[i] = replayResult(c, replayed, err)
				continue
			}
		}
		if reqs[i].pastExpiry != nil {
			results[i] = failed(c, reqs[i].pastExpiry)
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) > 0 {
		rs := make([]exchange.PlaceRequest, len(todo))
		for j, i := range todo {
			rs[j] = reqs[i].request(account)
		}
		for j, res := range s.cfg.Exchange.PlaceMany(ctx, rs) {
			i := todo[j]
			placed, replayed, err := s.placed(ctx, account, &reqs[i], res.Placed, res.Err)
			if err != nil || replayed != nil {
				results[i] = replayResult(c, replayed, err)
				continue
			}
			results[i] = BatchResult{Status: http.StatusCreated, Order: placedOf(&placed)}
		}
	}
	c.JSON(http.StatusCreated, gin.H{"results": results})
	return nil
}

// replayResult is a batch placement answered with an earlier order of its client order id, or
// with the error that replaying it met.
func replayResult(c *gin.Context, replayed *records.Order, err error) BatchResult {
	if err != nil {
		return failed(c, err)
	}
	return BatchResult{Status: http.StatusOK, Order: orderOf(replayed)}
}

// cancelBatch cancels the caller's orders named by id (1 to 100), or every one of its resting
// orders in a market, optionally of one side and outcome. Each order is cancelled or refused on
// its own; a market's cancels run together in one batch of its shard.
func (s *Server) cancelBatch(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	ctx, account := c.Request.Context(), accountOf(c)
	var reqs []exchange.CancelRequest
	var ids []uuid.UUID
	var errs []CancelError
	cancelError := func(id uuid.UUID, err error) {
		e := errorAnswer(c, err)
		errs = append(errs, CancelError{OrderID: id, Error: e.Message, Details: httpkit.ErrorDetails{Code: e.Code, Field: e.Field}})
	}
	switch byIDs, byMarket := obj.has("orderIds"), obj.has("marketId"); {
	case byIDs && byMarket:
		return httpkit.FieldError("orderIds", "invalid_value", "give orderIds, or marketId (with side and outcome if you like), not both")
	case byIDs:
		elems, err := obj.elements("orderIds", 1, maxBatchCancels)
		if err != nil {
			return err
		}
		if err := s.charge(c, ratelimit.Write, float64(len(elems)-1)); err != nil {
			return err
		}
		for i, el := range elems {
			var v string
			if json.Unmarshal(el, &v) != nil {
				return httpkit.FieldError("orderIds", "invalid_type", "orderIds[%d] must be a string", i)
			}
			id, err := parseUUID("orderIds", v)
			if err != nil {
				return err
			}
			f, err := s.orderFacts(ctx, id)
			if err != nil {
				cancelError(id, err)
				continue
			}
			reqs, ids = append(reqs, exchange.CancelRequest{Account: account, Market: f.market, Seq: f.seq}), append(ids, id)
		}
	case byMarket:
		market, err := obj.uuid("marketId")
		if err != nil {
			return err
		}
		var side engine.Side
		var outcome engine.Outcome
		if obj.has("side") {
			v, err := obj.string("side")
			if err != nil {
				return err
			}
			var ok bool
			if side, ok = engine.ParseSide(v); !ok {
				return httpkit.FieldError("side", "invalid_value", "side must be BUY or SELL")
			}
		}
		if obj.has("outcome") {
			v, err := obj.string("outcome")
			if err != nil {
				return err
			}
			var ok bool
			if outcome, ok = engine.ParseOutcome(v); !ok {
				return httpkit.FieldError("outcome", "invalid_value", "outcome must be YES or NO")
			}
		}
		resting, err := s.cfg.Store.AccountRestingOrders(ctx, account, market)
		if err != nil {
			return err
		}
		for _, o := range resting {
			if (side == 0 || o.Side == side.String()) && (outcome == 0 || o.Outcome == outcome.String()) {
				reqs, ids = append(reqs, exchange.CancelRequest{Account: account, Market: o.MarketID, Seq: o.Seq}), append(ids, o.ID)
			}
		}
	default:
		return httpkit.FieldError("orderIds", "missing_field", "give orderIds, or marketId (with side and outcome if you like)")
	}
	cancelled := []Order{}
	if len(reqs) > 0 {
		for i, res := range s.cfg.Exchange.CancelMany(ctx, reqs) {
			if res.Err != nil {
				cancelError(ids[i], res.Err)
				continue
			}
			s.orders.forget(ids[i])
			cancelled = append(cancelled, orderOf(&res.Order))
		}
	}
	if errs == nil {
		errs = []CancelError{}
	}
	c.JSON(http.StatusOK, gin.H{"cancelled": cancelled, "errors": errs})
	return nil
}
