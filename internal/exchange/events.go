package exchange

import (
	"context"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
)

// EventLifecycle is what moves an event's markets together (package event): the standalone
// exchange's shards and, in the operator, the router to the shard that owns the event's markets.
// Its errors are Transition's, and domain.ErrEventNotFound.
type EventLifecycle interface {
	TransitionEvent(ctx context.Context, event uuid.UUID, action domain.EventAction) error
}

// ConvertRequest asks to convert Quantity NO shares of each of an event's listed Outcomes (their
// keys) into Quantity YES shares of each other outcome and (k − 1) × 100 × Quantity cents
// (event.Conversion). ClientRequestID, when set, makes a retry answer the same conversion.
type ConvertRequest struct {
	Account         int64
	Event           uuid.UUID
	Outcomes        []string
	Quantity        int64
	ClientRequestID string
}

// Converter converts an event's shares on the shard owning the event's markets, in one of its
// batches. Its refusals: domain.ErrEventNotFound, domain.ErrEventNotOpen, event.ErrInvalidOutcomes
// and event.ErrInvalidQuantity, domain.ErrInsufficientShares, a risk limit's, and
// domain.ErrClientRequestIDReused for a client request id used for a different conversion.
type Converter interface {
	Convert(ctx context.Context, req ConvertRequest) (records.Conversion, error)
}
