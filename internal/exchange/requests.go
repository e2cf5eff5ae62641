package exchange

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
)

// PlaceRequest is an order to place for an account.
type PlaceRequest struct {
	Account  int64
	Market   uuid.UUID
	Side     engine.Side
	Outcome  engine.Outcome
	Price    int
	Quantity int64

	// The zero values of the rest are the plain order: good till cancelled, cancelling the
	// account's own resting orders it meets, without a client order id.
	TimeInForce engine.TimeInForce
	ExpiresAt   time.Time // GTD: when the order is cancelled if still open
	PostOnly    bool
	SelfTrade   engine.SelfTrade
	// ClientOrderID, when set, must be new to the account: a placement whose id an order already
	// has is refused with domain.ErrClientOrderIDTaken (the front answers with that order).
	ClientOrderID string
	Placement     string // the placement's fingerprint, kept with a client order id (records.Order)
	// OrderGroupID, when not zero, puts the order in one of the account's order groups: refused
	// with domain.ErrOrderGroupNotFound or domain.ErrOrderGroupTriggered (internal/shard/groups.go).
	OrderGroupID uuid.UUID
}

// PlaceResult is one placement's answer in PlaceMany: the order, or why it was refused.
type PlaceResult struct {
	Placed records.PlacedOrder
	Err    error
}

// CancelRequest is an account's cancel of one order of a market, named by its sequence number.
type CancelRequest struct {
	Account int64
	Market  uuid.UUID
	Seq     int64
	Reason  engine.CancelReason // recorded with the order; zero is engine.ReasonUser
}

// CancelResult is one cancel's answer in CancelMany: the order, or why it was refused.
type CancelResult struct {
	Order records.Order
	Err   error
}

// AmendRequest changes a resting order of the account, named by its sequence number: its price
// (0 keeps it) and its remaining quantity (0 keeps it). Side and outcome are the order's, as
// Postgres has them: the batch locks what the amend may reserve before it sees the order.
type AmendRequest struct {
	Account   int64
	Market    uuid.UUID
	Seq       int64
	Side      engine.Side
	Outcome   engine.Outcome
	Price     int
	Remaining int64
}

// Snapshot is a market's book as last committed: the best levels of both views.
type Snapshot struct {
	Status domain.MarketStatus
	Epoch  int64 // the ownership epoch the shard holds the market under
	Seq    int64 // the last number of the market's feed the snapshot reflects
	Depth  engine.Depth
}

// A Snapshot holds every level of the book (at most 99 a side), for the live feed's snapshots;
// GET /market/order-book shows the best DepthLevels of them.
const DepthLevels = 10

// RefuseCancel is the refusal of a cancel, by account, of an order that is in no book, given the
// order as last known — from the shard's memory of finished orders or from Postgres — or nil when
// Postgres has no such order. The order is another account's (domain.ErrNotYourOrder, checked
// first, as for an order still resting), or it is no longer resting (domain.OrderNotOpen, naming
// its status). Every Exchange refuses such a cancel, and such an amend, with it: the shard, and the
// router for a market no shard holds.
func RefuseCancel(account int64, o *records.Order) *domain.Error {
	switch {
	case o == nil:
		return domain.ErrOrderNotOpen
	case o.AccountID != account:
		return domain.ErrNotYourOrder
	case o.Status.Resting(): // not in the book, yet resting in Postgres: the book has the last word
		return domain.ErrOrderNotOpen
	}
	return domain.OrderNotOpen(o.Status.String())
}
