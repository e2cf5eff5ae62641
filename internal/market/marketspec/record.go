package marketspec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// Record stores a market spec under name, the metadata.name of the Market resource or manifest it
// comes from: the market with that id (or, when id is uuid.Nil, with that name) takes the spec's
// text and schedule; when there is none, a new OPEN market is created and created is true. Both
// the operator and the standalone exchange's manifest sync record markets through it. The spec is
// validated first (a *SpecError); lifecycle intent (closed, resolution) is not its business.
func Record(ctx context.Context, st Rows, id uuid.UUID, name string, spec v1alpha1.MarketSpec, now time.Time) (m records.Market, created bool, err error) {
	if id != uuid.Nil {
		m, err = st.Market(ctx, id)
	} else {
		m, err = st.MarketByName(ctx, name)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		if m, err = Create(ctx, st, spec, &name, now); err != nil {
			return m, false, fmt.Errorf("while creating market %q: %w", name, err)
		}
		return m, true, nil
	case err != nil:
		return m, false, fmt.Errorf("while reading market %q: %w", name, err)
	}
	if err := Validate(&spec); err != nil {
		return m, false, fmt.Errorf("market %q: %w", name, err)
	}
	if err := st.UpdateMarketText(ctx, Row(m.ID, spec, &name, now), now.UTC()); err != nil {
		return m, false, fmt.Errorf("while updating market %q: %w", name, err)
	}
	if m, err = st.Market(ctx, m.ID); err != nil {
		return m, false, fmt.Errorf("while reading market %q: %w", name, err)
	}
	return m, false, nil
}
