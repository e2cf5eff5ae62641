package market

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/store"
)

// Sync makes the markets in the database match Market manifests, as the standalone exchange does
// at start: a manifest whose metadata.name has no market yet creates one; an existing market takes
// the manifest's text and schedule; then the lifecycle intent (closed, resolution, closesAt) is
// carried out through target. It returns the markets in manifest order.
func Sync(ctx context.Context, st *store.Store, target Transitioner, manifests []v1alpha1.Market, now time.Time, log *slog.Logger) ([]store.Market, error) {
	out := make([]store.Market, 0, len(manifests))
	for i := range manifests {
		mf := &manifests[i]
		name := mf.Name
		m, err := st.MarketByName(ctx, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if m, err = Create(ctx, st, mf.Spec, &name, now); err != nil {
				return out, fmt.Errorf("while creating market %q: %w", name, err)
			}
			log.Info("created market from manifest", "name", name, "market", m.ID)
		case err != nil:
			return out, fmt.Errorf("while reading market %q: %w", name, err)
		default:
			spec := mf.Spec
			if err := Validate(&spec); err != nil {
				return out, fmt.Errorf("market %q: %w", name, err)
			}
			row := Row(m.ID, spec, &name, now)
			if err := st.UpdateMarketText(ctx, row, now.UTC()); err != nil {
				return out, fmt.Errorf("while updating market %q: %w", name, err)
			}
		}
		// At most two steps: e.g. CLOSED → OPEN is one, OPEN → RESOLVED another.
		intent := IntentOf(&mf.Spec)
		for range 2 {
			action, ok := intent.Next(m.Status, now)
			if !ok {
				break
			}
			if err := target.Transition(ctx, m.ID, action); err != nil {
				return out, fmt.Errorf("while applying %s to market %q: %w", action, name, err)
			}
			log.Info("applied manifest intent", "name", name, "market", m.ID, "action", action)
			if m, err = st.Market(ctx, m.ID); err != nil {
				return out, err
			}
		}
		if m, err = st.Market(ctx, m.ID); err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}
