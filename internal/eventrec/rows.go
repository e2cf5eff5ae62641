package eventrec

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
)

// Rows reads and writes events' rows, for Record: an interface of the package's own rather than
// the whole store (*store.Store has it).
type Rows interface {
	Event(ctx context.Context, id uuid.UUID) (records.Event, error)
	EventByName(ctx context.Context, name string) (records.Event, error)
	CreateEvent(ctx context.Context, e records.Event, markets []records.Market) (records.Event, error)
	UpdateEventText(ctx context.Context, e records.Event, markets []records.Market, now time.Time) error
}
