// Package shardapi is both ends of the internal protocol between the front API and the shards in
// distributed mode: its vocabulary, version 1, and the conversions to and from the processes'
// types (v1.go), how the version travels and a mismatch is refused (protocol.go), the one table of
// error codes (wire.go), the shard's HTTP server (server.go) and its checks of every request
// (validate.go), the client that calls it (client.go), and the Router, the front's Exchange, which
// sends each market's writes and book reads to the shard that owns it (router.go), and the
// operator's lifecycle changes too.
//
// The protocol is a shard's Exchange methods over HTTP, guarded by a token the processes share.
// Its messages are types of its own with JSON names of their own, so that renaming a field of
// exchange.PlaceRequest or records.Order changes nothing on the wire: orders travel whole, with their
// sequence numbers and accounts, so that side, outcome and status are decoded once, by the front;
// refusals travel whole as the *domain.Error the shard decided, other errors as codes that come
// back as the shard package's own errors, so the front answers exactly as pmx dev does. Fronts,
// shards and the operator of adjacent releases run together during a rolling upgrade: every
// request and answer carries its version, and an end refuses one it does not speak
// (docs/architecture.md §9).
package shardapi

import (
	"errors"
	"net/http"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/store"
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
	internalTransition = "/internal/v1/transition"
)

// errorWire is every error answer of the internal API: a refusal by the exchange's rules travels
// whole, as the shard decided it; any other error as its code in wireErrors. Error and Details are
// the same answer in the API's error shape, for whoever reads it (a front decodes Code and
// Refusal).
type errorWire struct {
	Code    string                `json:"code"`
	Refusal *refusalV1            `json:"refusal,omitempty"`
	Error   string                `json:"error,omitempty"`
	Details *httpkit.ErrorDetails `json:"details,omitempty"`
	// Speaks, with code unsupported_protocol, are the protocol versions the refusing end speaks.
	Speaks []int `json:"speaks,omitempty"`
	// HandedOver, with code not_owner, says that the shard handed the market over in a planned
	// handoff (exchange.ErrHandedOver; handoff.go): an addition to version 1, ignored by a front
	// of the release before.
	HandedOver bool `json:"handedOver,omitempty"`
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
	// A batch whose commit's answer was lost in a database failover (added with it: a front of
	// an earlier release reads it as an internal error, as it read the shard's answer before).
	{exchange.ErrOutcomeUnknown, "outcome_unknown", http.StatusServiceUnavailable},
	// A handoff refused with nothing moved (added with the checks: an operator of an earlier
	// release reads them as an internal error, naming the code).
	{store.ErrTargetNotLive, "target_not_live", http.StatusConflict},
	{store.ErrSplitsEvent, "splits_event", http.StatusConflict},
}

// wireErrorOf is how an error travels back from a shard: a refusal whole, a known error by its
// code; ok is false for any other error, which travels as "internal".
func wireErrorOf(err error) (status int, w errorWire, ok bool) {
	if refusal := (*domain.Error)(nil); errors.As(err, &refusal) {
		return http.StatusConflict, apiShape(errorWire{Code: refused, Refusal: refusalToWire(refusal)}, ""), true
	}
	if errors.Is(err, exchange.ErrHandedOver) {
		w := apiShape(errorWire{Code: "not_owner", HandedOver: true}, exchange.ErrHandedOver.Error())
		return http.StatusMisdirectedRequest, w, true
	}
	for _, we := range wireErrors {
		if errors.Is(err, we.err) {
			return we.status, apiShape(errorWire{Code: we.code}, we.err.Error()), true
		}
	}
	// The shard's database failing over under a read or a load: nothing was committed, unless a
	// commit's answer was what was lost.
	if errors.Is(err, store.ErrCommitUnknown) {
		return wireErrorOf(exchange.ErrOutcomeUnknown)
	}
	if store.Unreachable(err) {
		return wireErrorOf(exchange.ErrUnavailable)
	}
	return http.StatusInternalServerError, apiShape(errorWire{Code: "internal"}, "the shard failed to carry out the request; see its log"), false
}

// err is the error an answer's errorWire stands for, as wireErrorOf sent it.
func (e errorWire) err(status int) error {
	if e.Code == refused && e.Refusal != nil {
		return e.Refusal.refusal()
	}
	if e.Code == "not_owner" && e.HandedOver {
		return exchange.ErrHandedOver
	}
	for _, w := range wireErrors {
		if w.code == e.Code {
			return w.err
		}
	}
	return &internalCallError{status: status, code: e.Code}
}
