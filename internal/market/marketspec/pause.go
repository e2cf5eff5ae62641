package marketspec

import (
	"context"
	"fmt"
	"time"

	"github.com/pmx-dev/pmx/internal/records"
)

// Pause makes a recorded market's own pause what its spec says (spec.paused): a row in Postgres
// that every shard checks placements and amends against (docs/architecture.md §4, "Halts"), so,
// unlike a transition, it needs no shard to carry it out. It returns the row as it is afterwards,
// and whether it changed; the operator's Market reconciler and pmx dev's manifests both call it.
func Pause(ctx context.Context, st Rows, row records.Market, paused bool, now time.Time) (records.Market, bool, error) {
	if row.Paused == paused {
		return row, false, nil
	}
	if _, err := st.SetMarketPaused(ctx, row.ID, paused, now); err != nil {
		return row, false, fmt.Errorf("while setting market %s paused %v: %w", row.ID, paused, err)
	}
	row, err := st.Market(ctx, row.ID)
	return row, err == nil, err
}
