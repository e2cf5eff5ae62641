package marketspec

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestSyncFees: a Market manifest's spec.fees becomes the market's own schedule, as the operator
// makes a Market's; a manifest without it takes the schedule away.
func TestSyncFees(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mf := v1alpha1.Market{Spec: v1alpha1.MarketSpec{Question: "Will it rain?", Category: "weather",
		Fees: &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}}}
	mf.Name = "rain"

	for _, step := range []struct {
		name string
		fees *v1alpha1.FeeSchedule
		own  bool
		want engine.Fees
	}{
		{"set", &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}, true, engine.Fees{Taker: 700, Maker: -175}},
		{"same again", &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}, true, engine.Fees{Taker: 700, Maker: -175}},
		{"changed", &v1alpha1.FeeSchedule{TakerBps: 0, MakerBps: 0}, true, engine.Fees{}},
		{"removed", nil, false, engine.Fees{}},
	} {
		mf.Spec.Fees = step.fees
		out, err := Sync(ctx, st, nil, []v1alpha1.Market{mf}, now, log)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		stored, err := st.Market(ctx, out[0].ID)
		if err != nil || stored.OwnFees != step.own || stored.Fees != step.want || out[0].OwnFees != step.own || out[0].Fees != step.want {
			t.Errorf("%s: stored fees %+v (own %v), returned %+v (own %v), %v; want %+v (own %v)",
				step.name, stored.Fees, stored.OwnFees, out[0].Fees, out[0].OwnFees, err, step.want, step.own)
		}
	}
}
