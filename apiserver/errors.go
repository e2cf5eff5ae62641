package apiserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/store"
)

// Errors shared by several handlers.
var (
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

// statusClientClosedRequest is the status recorded (in logs and metrics; the client is gone) for a
// request whose client went away before its answer, nginx's 499.
const statusClientClosedRequest = 499

// refusalStatus is the status code of each kind of refusal.
var refusalStatus = map[domain.Kind]int{
	domain.Invalid:   http.StatusBadRequest,
	domain.Forbidden: http.StatusForbidden,
	domain.Conflict:  http.StatusConflict,
	domain.NotFound:  http.StatusNotFound,
}

// writeError maps an error to its answer: an *httpkit.Error as it says, a refusal (*domain.Error)
// by its kind, the shard's, the router's and the store's errors to theirs, anything else to a 500
// that is logged. It is the one place an error becomes an answer.
func writeError(c *gin.Context, err error) {
	httpkit.Abort(c, errorAnswer(c, err))
}

// errorAnswer is the answer an error maps to (see writeError), for the answers that carry several
// (the batch calls' results).
func errorAnswer(c *gin.Context, err error) *httpkit.Error {
	var e *httpkit.Error
	var refusal *domain.Error
	switch {
	case errors.As(err, &e):
	case errors.As(err, &refusal): // the exchange's rules, decided by the shard
		e = &httpkit.Error{Status: refusalStatus[refusal.Kind], Code: refusal.Code, Field: refusal.Field, Message: refusal.Message}
	case errors.Is(err, exchange.ErrManagedByOperator):
		e = httpkit.NewError(http.StatusConflict, "managed_by_operator", "%s", err.Error())
	case errors.Is(err, market.ErrIllegalTransition):
		e = httpkit.NewError(http.StatusConflict, "illegal_transition", "%s", err.Error())
	case errors.Is(err, store.ErrConflict):
		e = httpkit.NewError(http.StatusConflict, "conflict", "%s", err.Error())
	case errors.Is(err, exchange.ErrOutcomeUnknown):
		e = errOutcomeUnknown
	case errors.Is(err, exchange.ErrUnavailable), errors.Is(err, exchange.ErrStopped), errors.Is(err, exchange.ErrNotOwner):
		e = errUnavailable
	case errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil:
		// The client went away before its answer; what became of its request is logged where it
		// ran (the shard). Counted apart from the server's own failures.
		httpkit.Logger(c).Info("client went away before its answer", "method", c.Request.Method, "path", c.Request.URL.Path)
		e = httpkit.NewError(statusClientClosedRequest, "client_closed_request", "the client closed the request before its answer")
	default:
		httpkit.Logger(c).Error("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
		e = httpkit.NewError(http.StatusInternalServerError, "internal", "the exchange failed to answer; try again later")
	}
	return e
}
