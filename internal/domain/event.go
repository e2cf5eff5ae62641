package domain

import "fmt"

// EventAction is a lifecycle change of an event (package event), carried out by the shard that
// owns all of its markets, on all of them in one transaction: Action is CloseMarket, ReopenMarket
// or CancelMarket (a void at event.VoidPayout), or ResolveYes with Outcome the winning outcome's
// key (its market resolves YES, every other NO).
type EventAction struct {
	Action  MarketAction
	Outcome string // the winning key; only with ResolveYes
}

func (a EventAction) String() string {
	if a.Action == ResolveYes {
		return fmt.Sprintf("resolve to %q", a.Outcome)
	}
	return string(a.Action)
}

// Refusals of events' requests.
var (
	ErrEventNotFound = &Error{Kind: NotFound, Code: "event_not_found", Field: "eventId",
		Message: "no event has this id; GET /events lists them"}
	ErrEventNotOpen = &Error{Kind: Conflict, Code: "event_not_open", Field: "eventId",
		Message: "the event is not open: its markets are closed, resolved or cancelled"}
	// ErrMarketInEvent refuses a lifecycle change of one market of an event: the event's markets
	// move together, so close, reopen, resolve or cancel the event instead.
	ErrMarketInEvent = &Error{Kind: Conflict, Code: "market_in_event", Field: "marketId",
		Message: "this market is an outcome of an event and moves only with it; close, reopen, resolve or cancel the event (POST /admin/v1/events/{id}/...)"}
	// ErrClientRequestIDReused refuses a conversion whose clientRequestId the account used for a
	// different conversion.
	ErrClientRequestIDReused = &Error{Kind: Conflict, Code: "client_request_id_reused", Field: "clientRequestId",
		Message: "this clientRequestId was used for a different conversion; use a new one"}
)
