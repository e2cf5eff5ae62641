package exchange

import (
	"context"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
)

// EventLifecycle is what moves an event's markets together (package event): the standalone
// exchange's shards and, in the operator, the router to the shard that owns the event's markets.
// Its errors are Transition's, and domain.ErrEventNotFound.
type EventLifecycle interface {
	TransitionEvent(ctx context.Context, event uuid.UUID, action domain.EventAction) error
}
