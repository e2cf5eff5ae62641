package shard

import (
	"context"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
)

// Exchange executes market writes and serves books: one Shard, a Set of them (pmx dev, pmx
// shard), or in a front of the distributed exchange the router to the shard that owns each market
// (shardapi.Router). The front API and the shard's internal API serve whichever they are given.
type Exchange interface {
	Place(ctx context.Context, r PlaceRequest) (records.PlacedOrder, error)
	Cancel(ctx context.Context, r CancelRequest) (records.Order, error)
	Amend(ctx context.Context, r AmendRequest) (records.PlacedOrder, error)
	// PlaceMany and CancelMany run each market's requests together, in order, in one batch; each
	// request is answered on its own.
	PlaceMany(ctx context.Context, rs []PlaceRequest) []PlaceResult
	CancelMany(ctx context.Context, rs []CancelRequest) []CancelResult
	CancelAll(ctx context.Context, account int64, markets []uuid.UUID) ([]records.Order, error)
	Transition(ctx context.Context, market uuid.UUID, action domain.MarketAction) error
	OrderBook(ctx context.Context, market uuid.UUID) (*Snapshot, error)
}

var (
	_ Exchange = (*Shard)(nil)
	_ Exchange = (*Set)(nil)
)
