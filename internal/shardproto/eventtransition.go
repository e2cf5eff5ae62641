package shardproto

import (
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
)

// PathEventTransition moves an event's markets together on the shard that owns them all
// (exchange.EventLifecycle). It is new in version 1, as an optional call: a shard of the release
// before events answers 404, which the operator reports and retries, as it did for transition.
const PathEventTransition = "/internal/v1/event-transition"

// EventTransitionV1 is an event's lifecycle change: action spelt as transition's, with the winning
// outcome's key for "resolve YES".
type EventTransitionV1 struct {
	Event   uuid.UUID `json:"event"`
	Action  string    `json:"action"`
	Outcome string    `json:"outcome,omitempty"`
}

// CheckEventTransition checks an event's lifecycle change and returns its action.
func CheckEventTransition(w *EventTransitionV1) (domain.EventAction, *domain.Error) {
	if w.Event == uuid.Nil {
		return domain.EventAction{}, Invalid("event", "event must be an event's id, a UUID")
	}
	a, ok := TransitionV1{Action: w.Action}.MarketAction()
	if !ok || a == domain.ResolveNo {
		return domain.EventAction{}, Invalid("action", "the action must be one of close, reopen, resolve YES (with outcome), cancel")
	}
	if (a == domain.ResolveYes) != (w.Outcome != "") {
		return domain.EventAction{}, Invalid("outcome", "outcome, the winning outcome's key, goes with resolve YES and nothing else")
	}
	return domain.EventAction{Action: a, Outcome: w.Outcome}, nil
}
