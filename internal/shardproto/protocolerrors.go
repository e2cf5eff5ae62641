package shardproto

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
	PathPlace      = "/internal/v1/place"
	PathCancel     = "/internal/v1/cancel"
	PathAmend      = "/internal/v1/amend"
	PathPlaceMany  = "/internal/v1/place-many"
	PathCancelMany = "/internal/v1/cancel-many"
	PathCancelAll  = "/internal/v1/cancel-all"
	PathBook       = "/internal/v1/book"
	PathTransition = "/internal/v1/transition"
)

// ErrorV1 is every error answer of the internal API: a refusal by the exchange's rules travels
// whole, as the shard decided it; any other error as its code in errorCodes. Error and Details are
// the same answer in the API's error shape, for whoever reads it (a front decodes Code and
// Refusal).
type ErrorV1 struct {
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

// APIShape is an ErrorV1 with the API's error shape filled in: code and field of a refusal, or
// code alone.
func APIShape(w ErrorV1, message string) ErrorV1 {
	w.Error, w.Details = message, &httpkit.ErrorDetails{Code: w.Code}
	if w.Refusal != nil {
		w.Error, w.Details = w.Refusal.Message, &httpkit.ErrorDetails{Code: w.Refusal.Code, Field: w.Refusal.Field}
	}
	return w
}

// refused is the code of an answer that carries a refusal.
const CodeRefused = "refused"

// errorCodes pairs each error that is not a refusal with its code and status on the internal API.
var errorCodes = []struct {
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

// ErrorOf is how an error travels back from a shard: a refusal whole, a known error by its
// code; ok is false for any other error, which travels as "internal".
func ErrorOf(err error) (status int, w ErrorV1, ok bool) {
	if refusal := (*domain.Error)(nil); errors.As(err, &refusal) {
		return http.StatusConflict, APIShape(ErrorV1{Code: CodeRefused, Refusal: RefusalToV1(refusal)}, ""), true
	}
	if errors.Is(err, exchange.ErrHandedOver) {
		w := APIShape(ErrorV1{Code: "not_owner", HandedOver: true}, exchange.ErrHandedOver.Error())
		return http.StatusMisdirectedRequest, w, true
	}
	for _, we := range errorCodes {
		if errors.Is(err, we.err) {
			return we.status, APIShape(ErrorV1{Code: we.code}, we.err.Error()), true
		}
	}
	// The shard's database failing over under a read or a load: nothing was committed, unless a
	// commit's answer was what was lost.
	if errors.Is(err, store.ErrCommitUnknown) {
		return ErrorOf(exchange.ErrOutcomeUnknown)
	}
	if store.Unreachable(err) {
		return ErrorOf(exchange.ErrUnavailable)
	}
	return http.StatusInternalServerError, APIShape(ErrorV1{Code: "internal"}, "the shard failed to carry out the request; see its log"), false
}

// err is the error an answer's ErrorV1 stands for, as ErrorOf sent it.
func (e ErrorV1) Err(status int) error {
	if e.Code == CodeRefused && e.Refusal != nil {
		return e.Refusal.Refusal()
	}
	if e.Code == "not_owner" && e.HandedOver {
		return exchange.ErrHandedOver
	}
	for _, w := range errorCodes {
		if w.code == e.Code {
			return w.err
		}
	}
	return &internalCallError{status: status, code: e.Code}
}

// internalCallError is an error answer whose code this build does not know.
type internalCallError struct {
	status int
	code   string
}

func (e *internalCallError) Error() string {
	return "shard answered " + http.StatusText(e.status) + " (" + e.code + ")"
}

// RefusalResult is a refused request's result in a many-at-once answer.
func RefusalResult(e *domain.Error) *ErrorV1 {
	w := APIShape(ErrorV1{Code: CodeRefused, Refusal: RefusalToV1(e)}, "")
	return &w
}
