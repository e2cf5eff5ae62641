package market

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
)

// What the package asks of the database, as interfaces of its own rather than the whole store
// (*store.Store has them all).

// ClosingReads are what the Closer reads: which markets are due to close, and when the next is.
type ClosingReads interface {
	Market(ctx context.Context, id uuid.UUID) (records.Market, error)
	MarketsClosingBy(ctx context.Context, t time.Time) ([]uuid.UUID, error)
	NextClosing(ctx context.Context) (*time.Time, error)
}
