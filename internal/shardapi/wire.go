// Package shardapi is both ends of the internal protocol between the front API and the shards in
// distributed mode: the wire types and the one table of error codes (wire.go), the shard's HTTP
// server (server.go) and its checks of every request (validate.go), the client that calls it
// (client.go), and the Router, the front's Exchange, which sends each market's writes and book
// reads to the shard that owns it (router.go).
//
// The protocol is a shard's Exchange methods over HTTP, guarded by a token the processes share.
// Requests and answers are the contract's own types as they are (exchange.PlaceRequest and
// exchange.CancelRequest; records.PlacedOrder and records.Order with their sequence numbers and
// accounts, exchange.Snapshot), in JSON with the Go field names, so that side, outcome and status
// are decoded once, by the front; refusals travel whole as the *domain.Error the shard decided,
// other errors as codes that come back as the contract's own errors (exchange.ErrNotOwner, ...),
// so the front answers exactly as pmx dev does. Fronts and shards of one deployment run the same
// build.
package shardapi

import (
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/records"
)

// Internal API paths.
const (
	internalPlace      = "/internal/v1/place"
	internalCancel     = "/internal/v1/cancel"
	internalAmend      = "/internal/v1/amend"
	internalPlaceMany  = "/internal/v1/place-many"
	internalCancelMany = "/internal/v1/cancel-many"
	internalCancelAll  = "/internal/v1/cancel-all"
	internalBook       = "/internal/v1/book"
)

// A placement is a exchange.PlaceRequest and a cancel a exchange.CancelRequest, sent as they are.

type cancelAllWire struct {
	Account int64       `json:"account"`
	Markets []uuid.UUID `json:"markets"`
}

// errorWire is every error answer of the internal API: a refusal by the exchange's rules travels
// whole, as the shard decided it; any other error as its code in wireErrors. Error and Details are
// the same answer in the API's error shape, for whoever reads it (a front decodes Code and
// Refusal).
type errorWire struct {
	Code    string                `json:"code"`
	Refusal *domain.Error         `json:"refusal,omitempty"`
	Error   string                `json:"error,omitempty"`
	Details *httpkit.ErrorDetails `json:"details,omitempty"`
}

// apiShape is an errorWire with the API's error shape filled in: code and field of a refusal, or
// code alone.
func apiShape(w errorWire, message string) errorWire {
	w.Error, w.Details = message, &httpkit.ErrorDetails{Code: w.Code}
	if w.Refusal != nil {
		w.Error, w.Details = w.Refusal.Message, &httpkit.ErrorDetails{Code: w.Refusal.Code, Field: w.Refusal.Field}
	}
	return w
}

// refused is the code of an answer that carries a refusal.
const refused = "refused"

// wireErrors pairs each error that is not a refusal with its code and status on the internal API.
var wireErrors = []struct {
	err    error
	code   string
	status int
}{
	{exchange.ErrNotOwner, "not_owner", http.StatusMisdirectedRequest},
	{exchange.ErrStopped, "stopped", http.StatusServiceUnavailable},
	{exchange.ErrUnavailable, "unavailable", http.StatusServiceUnavailable},
	{market.ErrIllegalTransition, "illegal_transition", http.StatusConflict},
}

// wireErrorOf is how an error travels back from a shard: a refusal whole, a known error by its
// code; ok is false for any other error, which travels as "internal".
func wireErrorOf(err error) (status int, w errorWire, ok bool) {
	if refusal := (*domain.Error)(nil); errors.As(err, &refusal) {
		return http.StatusConflict, apiShape(errorWire{Code: refused, Refusal: refusal}, ""), true
	}
	for _, we := range wireErrors {
		if errors.Is(err, we.err) {
			return we.status, apiShape(errorWire{Code: we.code}, we.err.Error()), true
		}
	}
	return http.StatusInternalServerError, apiShape(errorWire{Code: "internal"}, "the shard failed to carry out the request; see its log"), false
}

// err is the error an answer's errorWire stands for, as wireErrorOf sent it.
func (e errorWire) err(status int) error {
	if e.Code == refused && e.Refusal != nil {
		return e.Refusal
	}
	for _, w := range wireErrors {
		if w.code == e.Code {
			return w.err
		}
	}
	return &internalCallError{status: status, code: e.Code}
}

// The answers of the many-at-once calls: one result per request, in order, each the answer or
// its error.
type placeResultWire struct {
	Placed *records.PlacedOrder `json:"placed,omitempty"`
	Error  *errorWire           `json:"error,omitempty"`
}

type cancelResultWire struct {
	Order *records.Order `json:"order,omitempty"`
	Error *errorWire     `json:"error,omitempty"`
}
