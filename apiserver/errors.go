package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/market"
	"github.com/pmx-dev/pmx/shard"
	"github.com/pmx-dev/pmx/store"
)

// Error is an API error: its status, a stable snake_case code, the field at fault if any, and a
// sentence for humans saying what was wrong and what to do.
type Error struct {
	Status  int
	Code    string
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// errorBody is the JSON shape of every error answer (DESIGN §2).
type errorBody struct {
	Error   string       `json:"error"`
	Details errorDetails `json:"details"`
}

type errorDetails struct {
	Code  string `json:"code"`
	Field string `json:"field,omitempty"`
}

func newError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func fieldError(field, code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Errors shared by several handlers.
var (
	errMarketNotFound = &Error{Status: http.StatusBadRequest, Code: "market_not_found", Field: "marketId",
		Message: "no market has this id; list markets with GET /markets"}
	errUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "the exchange could not commit this request; nothing was changed, try again"}
	errOutcomeUnknown = &Error{Status: http.StatusServiceUnavailable, Code: "outcome_unknown",
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

// writeError maps an error to its answer: an *Error as it says, the shard's and the store's
// errors to theirs, anything else to a 500 that is logged.
func writeError(c *gin.Context, err error) {
	var e *Error
	var notOpen *shard.NotOpenError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &notOpen): // the shard knows what became of the order
		e = errOrderNotOpen(notOpen.Status)
	case errors.Is(err, shard.ErrUnknownMarket):
		e = errMarketNotFound
	case errors.Is(err, shard.ErrMarketNotOpen):
		e = fieldError("marketId", "market_not_open", "the market is not open for trading")
	case errors.Is(err, shard.ErrInsufficientFunds):
		e = fieldError("quantity", "insufficient_funds", "not enough available cash: a BUY locks price × quantity cents")
	case errors.Is(err, shard.ErrInsufficientShares):
		e = fieldError("quantity", "insufficient_shares", "not enough unlocked shares of this outcome to sell")
	case errors.Is(err, shard.ErrOrderNotOpen):
		e = fieldError("orderId", "order_not_open", "the order is no longer open: it was filled or cancelled")
	case errors.Is(err, ErrManagedByOperator):
		e = newError(http.StatusConflict, "managed_by_operator", "%s", err.Error())
	case errors.Is(err, market.ErrIllegalTransition):
		e = newError(http.StatusConflict, "illegal_transition", "%s", err.Error())
	case errors.Is(err, store.ErrConflict):
		e = newError(http.StatusConflict, "conflict", "%s", err.Error())
	case errors.Is(err, ErrOutcomeUnknown):
		e = errOutcomeUnknown
	case errors.Is(err, shard.ErrUnavailable), errors.Is(err, shard.ErrStopped), errors.Is(err, shard.ErrNotOwner):
		e = errUnavailable
	default:
		logger(c).Error("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
		e = newError(http.StatusInternalServerError, "internal", "the exchange failed to answer; try again later")
	}
	if e.Status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="pmx"`)
	}
	c.AbortWithStatusJSON(e.Status, errorBody{Error: e.Message, Details: errorDetails{Code: e.Code, Field: e.Field}})
}
