package marketspec

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/records"
)

// Sync makes the markets in the database match Market manifests, as the standalone exchange does
// at start: each manifest is recorded under its metadata.name (Record), its pause and fee schedule
// made what it says (Pause, SetFees), then its lifecycle intent (closed, resolution, closesAt) is
// carried out through target. It returns the markets in manifest
// order.
func Sync(ctx context.Context, st Rows, target market.Transitioner, manifests []v1alpha1.Market, now time.Time, log *slog.Logger) ([]records.Market, error) {
	out := make([]records.Market, 0, len(manifests))
	for i := range manifests {
		mf := &manifests[i]
		m, created, err := Record(ctx, st, uuid.Nil, mf.Name, mf.Spec, now)
		if err != nil {
			return out, err
		}
		if created {
			log.Info("created market from manifest", "name", mf.Name, "market", m.ID)
		}
		placement.LogIgnored(log, "name", mf.Name, mf.Spec.ShardPool, string(mf.Spec.Placement))
		var paused bool
		if m, paused, err = Pause(ctx, st, m, mf.Spec.Paused, now); err != nil {
			return out, err
		} else if paused {
			log.Info("applied manifest pause", "name", mf.Name, "market", m.ID, "paused", mf.Spec.Paused)
		}
		var feesSet bool
		if m, feesSet, err = SetFees(ctx, st, m, mf.Spec.Fees, now); err != nil {
			return out, err
		} else if feesSet {
			log.Info("applied manifest fee schedule", "name", mf.Name, "market", m.ID, "fees", DescribeFees(FeesOf(mf.Spec.Fees)))
		}
		// At most two steps: e.g. CLOSED → OPEN is one, OPEN → RESOLVED another.
		intent := IntentOf(&mf.Spec)
		for range 2 {
			action, ok := intent.Next(m.Status, now)
			if !ok {
				break
			}
			if err := target.Transition(ctx, m.ID, action); err != nil {
				return out, fmt.Errorf("while applying %s to market %q: %w", action, mf.Name, err)
			}
			log.Info("applied manifest intent", "name", mf.Name, "market", m.ID, "action", action)
			if m, err = st.Market(ctx, m.ID); err != nil {
				return out, err
			}
		}
		out = append(out, m)
	}
	return out, nil
}
