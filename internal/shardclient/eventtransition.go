package shardclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/store"
)

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
	w := shardproto.EventTransitionV1{Event: id, Action: shardproto.TransitionToV1(id, a.Action).Action, Outcome: a.Outcome}
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
		err = r.noteVersion(c.call(ctx, http.MethodPost, shardproto.PathEventTransition, w, nil))
		if !errors.Is(err, exchange.ErrNotOwner) || attempt == 1 {
			return err
		}
	}
}
