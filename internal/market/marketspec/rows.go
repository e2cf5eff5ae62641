package marketspec

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/records"
)

// What the package asks of the database, as an interface of its own rather than the whole store
// (*store.Store has it).

// Rows reads and writes markets' rows, for Create, Record and Sync.
type Rows interface {
	Market(ctx context.Context, id uuid.UUID) (records.Market, error)
	MarketByName(ctx context.Context, name string) (records.Market, error)
	CreateMarket(ctx context.Context, m records.Market) (records.Market, error)
	UpdateMarketText(ctx context.Context, m records.Market, now time.Time) error
	// SetMarketPaused pauses or resumes a market on its own (spec.paused; Pause).
	SetMarketPaused(ctx context.Context, id uuid.UUID, paused bool, now time.Time) (changed bool, err error)
	// SetMarketFees gives a market its own fee schedule or takes it away (nil) (spec.fees; SetFees).
	SetMarketFees(ctx context.Context, id uuid.UUID, fees *engine.Fees, now time.Time) (changed bool, err error)
}
