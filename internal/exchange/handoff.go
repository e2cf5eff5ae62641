package exchange

import (
	"context"

	"github.com/google/uuid"
)

// Handoff is the planned move of markets between two named shards (docs/architecture.md §6, "The
// planned handoff"), which a shard process carries out for the operator: the old owner finishes
// what it has taken for the markets, moves them in Postgres and drops them (HandOff), and the new
// owner, told so, loads them at once (TakeOver).
type Handoff interface {
	// HandOff hands markets this shard owns to the shard named to, under the next epoch, once every
	// command it took for them before has committed; every command for them after is refused with
	// ErrHandedOver. It returns the markets' new epochs. ErrNotOwner: the shard does not hold every
	// market under the epoch Postgres records, and none moved.
	HandOff(ctx context.Context, markets []uuid.UUID, to string) (epochs []int64, err error)
	// TakeOver loads markets handed to this shard under the given epochs (a copy held under an
	// earlier epoch is dropped first). A market that is not its own is left alone.
	TakeOver(ctx context.Context, markets []uuid.UUID, epochs []int64) error
}

// ErrHandedOver refuses a command for a market its shard has handed to another in a planned
// handoff: nothing was done, and the front sends the command to the new owner. It is an
// ErrNotOwner, which is all a front of the release before the handoff reads in it.
var ErrHandedOver error = handedOver{}

type handedOver struct{}

func (handedOver) Error() string {
	return "this shard has handed the market to another shard; nothing was done"
}

// Is makes ErrHandedOver an ErrNotOwner.
func (handedOver) Is(target error) bool { return target == ErrNotOwner }
