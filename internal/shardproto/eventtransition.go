package shardapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/store"
)

// internalEventTransition moves an event's markets together on the shard that owns them all
// (exchange.EventLifecycle). It is new in version 1, as an optional call: a shard of the release
// before events answers 404, which the operator reports and retries, as it did for transition.
const internalEventTransition = "/internal/v1/event-transition"

// eventTransitionV1 is an event's lifecycle change: action spelt as transition's, with the winning
// outcome's key for "resolve YES".
type eventTransitionV1 struct {
	Event   uuid.UUID `json:"event"`
	Action  string    `json:"action"`
	Outcome string    `json:"outcome,omitempty"`
}

// checkEventTransition checks an event's lifecycle change and returns its action.
func checkEventTransition(w *eventTransitionV1) (domain.EventAction, *domain.Error) {
	if w.Event == uuid.Nil {
		return domain.EventAction{}, invalid("event", "event must be an event's id, a UUID")
	}
	a, ok := transitionV1{Action: w.Action}.action()
	if !ok || a == domain.ResolveNo {
		return domain.EventAction{}, invalid("action", "the action must be one of close, reopen, resolve YES (with outcome), cancel")
	}
	if (a == domain.ResolveYes) != (w.Outcome != "") {
		return domain.EventAction{}, invalid("outcome", "outcome, the winning outcome's key, goes with resolve YES and nothing else")
	}
	return domain.EventAction{Action: a, Outcome: w.Outcome}, nil
}

// transitionEvent carries an event's change out on this process's shards.
func transitionEvent(ctx context.Context, sh exchange.Shard, id uuid.UUID, a domain.EventAction) error {
	return sh.TransitionEvent(ctx, id, a)
}

// TransitionEvent, in the operator (Lifecycle), has the shard that owns an event's markets move
// them together. The owner of the event's first outcome's market is asked; it refuses unless it
// owns them all, which the operator's scheduling makes so. No live owner is exchange.ErrUnavailable.
func (r *Router) TransitionEvent(ctx context.Context, id uuid.UUID, a domain.EventAction) error {
	if !r.Lifecycle {
		return exchange.ErrManagedByOperator
	}
	e, err := r.Store.Event(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return domain.ErrEventNotFound
	} else if err != nil {
		return err
	}
	hc := r.client()
	w := eventTransitionV1{Event: id, Action: transitionToWire(id, a.Action).Action, Outcome: a.Outcome}
	for attempt := 0; ; attempt++ {
		o, err := r.Store.Owner(ctx, e.Outcomes[0].MarketID)
		if err != nil {
			return err
		}
		addr := ""
		if o.Shard != "" {
			if addr, err = r.Store.ShardAddress(ctx, o.Shard); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if addr == "" {
			return fmt.Errorf("event %s's markets have no live owner: %w", id, exchange.ErrUnavailable)
		}
		c := &shardClient{base: "http://" + addr, token: r.Token, http: hc}
		err = r.noteVersion(c.call(ctx, http.MethodPost, internalEventTransition, w, nil))
		if !errors.Is(err, exchange.ErrNotOwner) || attempt == 1 {
			return err
		}
	}
}
