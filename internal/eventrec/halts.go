package eventrec

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
)

// HaltRows reads an event's row and writes its pause and fee schedule, for Pause and SetFees
// (*store.Store has it).
type HaltRows interface {
	Event(ctx context.Context, id uuid.UUID) (records.Event, error)
	// SetEventPaused pauses or resumes every market of an event (migration 033).
	SetEventPaused(ctx context.Context, id uuid.UUID, paused bool, now time.Time) (changed bool, err error)
	// SetEventFees gives an event its fee schedule, which its markets without one of their own
	// carry, or takes it away (nil) (migration 035).
	SetEventFees(ctx context.Context, id uuid.UUID, fees *engine.Fees, now time.Time) (changed bool, err error)
}

// Pause makes a recorded event's pause what its spec says (spec.paused), which halts every market
// of it: a row in Postgres that every shard checks placements and amends against
// (docs/architecture.md §4, "Halts"), so no shard carries it out. It returns the event's row as it
// is afterwards, and whether it changed; the operator's Event reconciler and pmx dev's manifests
// both call it, as marketspec.Pause is a Market's.
func Pause(ctx context.Context, st HaltRows, e records.Event, paused bool, now time.Time) (records.Event, bool, error) {
	if e.Paused == paused {
		return e, false, nil
	}
	if _, err := st.SetEventPaused(ctx, e.ID, paused, now); err != nil {
		return e, false, fmt.Errorf("while setting event %s paused %v: %w", e.ID, paused, err)
	}
	e, err := st.Event(ctx, e.ID)
	return e, err == nil, err
}

// SetFees makes a recorded event's fee schedule what its spec says (spec.fees): set, changed, or
// taken away when fees is nil. The schedule, like the pause, is a row in Postgres that every shard
// reads with the halts, so that the orders placed in the event's markets (those without a schedule
// of their own) after it commits carry it: no shard carries it out. A schedule out of the CRD's
// bounds (FeeSchedule.Check) is refused, nothing changed. The event's row shows no schedule as
// the zero one, so a schedule of two zero rates counts as none, which charges the same. It returns the event's row as it is afterwards, and whether it changed; the operator's
// Event reconciler and pmx dev's manifests both call it, as marketspec.SetFees is a Market's.
func SetFees(ctx context.Context, st HaltRows, e records.Event, fees *v1alpha1.FeeSchedule, now time.Time) (records.Event, bool, error) {
	if fees != nil {
		if err := fees.Check("spec.fees"); err != nil {
			return e, false, err
		}
	}
	want := marketspec.FeesOf(fees)
	if want == nil && e.Fees == (engine.Fees{}) || want != nil && *want == e.Fees {
		return e, false, nil
	}
	if _, err := st.SetEventFees(ctx, e.ID, want, now); err != nil {
		return e, false, fmt.Errorf("while setting the fee schedule of event %s to %s: %w", e.ID, marketspec.DescribeFees(want), err)
	}
	e, err := st.Event(ctx, e.ID)
	return e, err == nil, err
}
