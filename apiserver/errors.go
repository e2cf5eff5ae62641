package apiserver

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/httpkit"
	"github.com/pmx-dev/pmx/market"
	"github.com/pmx-dev/pmx/shard"
	"github.com/pmx-dev/pmx/shardapi"
	"github.com/pmx-dev/pmx/store"
)

// Errors shared by several handlers.
var (
	errMarketNotFound = &httpkit.Error{Status: http.StatusBadRequest, Code: "market_not_found", Field: "marketId",
		Message: "no market has this id; list markets with GET /markets"}
	errUnavailable = &httpkit.Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "the exchange could not commit this request; nothing was changed, try again"}
	errOutcomeUnknown = &httpkit.Error{Status: http.StatusServiceUnavailable, Code: "outcome_unknown",
		Message: "the exchange did not confirm this request, which may have been carried out: check your orders (GET /api/v1/orders) before sending it again"}
)

// handler adapts a handler that returns an error to gin, writing the error answer.
func handler(h func(*gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			writeError(c, err)
		}
	}
}

// writeError maps an error to its answer: an *httpkit.Error as it says, the shard's and the store's
// errors to theirs, anything else to a 500 that is logged.
func writeError(c *gin.Context, err error) {
	var e *httpkit.Error
	var notOpen *shard.NotOpenError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &notOpen): // the shard knows what became of the order
		e = errOrderNotOpen(notOpen.Status)
	case errors.Is(err, shard.ErrUnknownMarket):
		e = errMarketNotFound
	case errors.Is(err, shard.ErrMarketNotOpen):
		e = httpkit.FieldError("marketId", "market_not_open", "the market is not open for trading")
	case errors.Is(err, shard.ErrInsufficientFunds):
		e = httpkit.FieldError("quantity", "insufficient_funds", "not enough available cash: a BUY locks price × quantity cents")
	case errors.Is(err, shard.ErrInsufficientShares):
		e = httpkit.FieldError("quantity", "insufficient_shares", "not enough unlocked shares of this outcome to sell")
	case errors.Is(err, shard.ErrOrderNotOpen):
		e = httpkit.FieldError("orderId", "order_not_open", "the order is no longer open: it was filled or cancelled")
	case errors.Is(err, shardapi.ErrManagedByOperator):
		e = httpkit.NewError(http.StatusConflict, "managed_by_operator", "%s", err.Error())
	case errors.Is(err, market.ErrIllegalTransition):
		e = httpkit.NewError(http.StatusConflict, "illegal_transition", "%s", err.Error())
	case errors.Is(err, store.ErrConflict):
		e = httpkit.NewError(http.StatusConflict, "conflict", "%s", err.Error())
	case errors.Is(err, shardapi.ErrOutcomeUnknown):
		e = errOutcomeUnknown
	case errors.Is(err, shard.ErrUnavailable), errors.Is(err, shard.ErrStopped), errors.Is(err, shard.ErrNotOwner):
		e = errUnavailable
	default:
		httpkit.Logger(c).Error("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
		e = httpkit.NewError(http.StatusInternalServerError, "internal", "the exchange failed to answer; try again later")
	}
	httpkit.Abort(c, e)
}
