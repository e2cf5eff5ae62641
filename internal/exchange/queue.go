package exchange

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
)

// QueueReader answers where an account's resting orders stand in their books' queues, exact when
// answered: the owning shard reads each order's level in the batch loop that changes it.
type QueueReader interface {
	// QueuePositions answers each order of refs on its own, in order: its position, or why not —
	// domain.ErrNotYourOrder for another account's order, domain.ErrOrderNotOpen (with the
	// order's status where known) for one no longer resting or never placed, or an error of the
	// exchange (ErrUnavailable, ...).
	QueuePositions(ctx context.Context, account int64, refs []OrderRef) []QueueResult
}

// OrderRef names an order where it lives: its market and its number there.
type OrderRef struct {
	Market uuid.UUID
	Seq    int64
}

// QueuePosition is where a resting order stands in its price level's queue, in its own terms: its
// side, outcome and price, the unfilled shares of the orders ahead of it at that level (time
// priority; YES and NO orders of the level alike) and the unfilled shares of the whole level, its
// own included.
type QueuePosition struct {
	Side    engine.Side
	Outcome engine.Outcome
	Price   int
	Ahead   int64
	Level   int64
	// Epoch is the epoch under which the answering shard holds the market, which the internal
	// protocol checks against the front's as it does a book's.
	Epoch int64
}

// QueueResult is one order's answer in QueuePositions: its position, or Err.
type QueueResult struct {
	Position QueuePosition
	Err      error
}

// RefuseQueuePosition is the refusal of a queue position for an order that is not in its book, by
// what Postgres (or the shard's memory) knows of it, or nil when nothing does: another account's
// order is domain.ErrNotYourOrder, as a cancel of it is; any other is domain.ErrOrderNotOpen,
// naming its status.
func RefuseQueuePosition(account int64, o *records.Order) *domain.Error {
	err := RefuseCancel(account, o)
	if err.Code == domain.ErrOrderNotOpen.Code && o != nil && !o.Status.Resting() {
		e := *err
		e.Message = fmt.Sprintf("the order is %s: only OPEN and PARTIALLY_FILLED orders rest in the book and have a place in its queue", o.Status)
		return &e
	}
	return err
}
