package marketspec

import (
	"context"
	"fmt"
	"time"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/records"
)

// FeesOf is the engine's form of a spec's fee schedule (spec.fees of a Market or an Event); nil for
// none.
func FeesOf(f *v1alpha1.FeeSchedule) *engine.Fees {
	if f == nil {
		return nil
	}
	return &engine.Fees{Taker: int(f.TakerBps), Maker: int(f.MakerBps)}
}

// SetFees makes a recorded market's own fee schedule what its spec says (spec.fees; nil takes its
// own away, leaving its event's or none). Like a pause (Pause), a schedule is a row in Postgres
// that every shard reads with the halts, so that orders placed after the change commits carry it;
// no shard carries it out. It returns the row as it is afterwards, and whether it changed; the
// operator's Market reconciler and pmx dev's manifests both call it.
func SetFees(ctx context.Context, st Rows, row records.Market, fees *v1alpha1.FeeSchedule, now time.Time) (records.Market, bool, error) {
	want := FeesOf(fees)
	if want == nil && !row.OwnFees || want != nil && row.OwnFees && row.Fees == *want {
		return row, false, nil
	}
	if _, err := st.SetMarketFees(ctx, row.ID, want, now); err != nil {
		return row, false, fmt.Errorf("while setting the fee schedule of market %s to %s: %w", row.ID, DescribeFees(want), err)
	}
	row, err := st.Market(ctx, row.ID)
	return row, err == nil, err
}

// DescribeFees says a schedule in words, for logs and Kubernetes events: "taker 700 bps, maker
// -175 bps", or "none".
func DescribeFees(f *engine.Fees) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("taker %d bps, maker %d bps", f.Taker, f.Maker)
}
