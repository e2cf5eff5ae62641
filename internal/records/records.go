// Package records holds the Go form of the exchange's rows (markets, orders, trades, positions,
// accounts) apart from the SQL that reads and writes them (package store), so that a package that
// only passes rows around — the exchange contract (package exchange) above all — does not link the
// database driver. It imports nothing but the vocabulary the rows are spelt in. See
// docs/architecture.md §1.
package records

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
)

// Market is a market's row.
type Market struct {
	ID          uuid.UUID
	URL         *string
	Question    string
	Description *string
	Category    string
	Status      domain.MarketStatus
	ClosesAt    *time.Time
	ResolvesAt  *time.Time
	Resolved    bool
	Outcome     *string // the resolution, YES or NO; null until resolved
	LabelA      string
	LabelB      string
	CreatedAt   time.Time
	UpdatedAt   time.Time

	Name           *string // the Market manifest's metadata.name, if it came from one
	LastTradePrice *int    // YES price of the last trade
	Shard          *string // the shard that owns the market, in distributed mode
	Epoch          int64   // bumped at every change of owner
	EventSeq       int64   // the last number of the market's feed sequence (package feed)

	EventID    *uuid.UUID // the event whose outcome the market answers; nil for a market of its own
	OutcomeKey *string    // the outcome's key within that event

	Paused   bool        // paused on its own (migration 033); written only by SetMarketPaused
	Halted   domain.Halt // what halts it as read: its own pause, its event's or the exchange's
	SeriesID *uuid.UUID  // the series (MarketSeries) that listed the market, or its event; nil for none
	// Fees is the fee schedule its new orders carry (migration 035): its own, else its event's,
	// else none (the zero Fees). OwnFees says whether it is its own.
	Fees    engine.Fees
	OwnFees bool
	// Pool is the ShardPool whose shards may serve it, and Dedicated whether it asked for a shard
	// of its own (migration 038; package placement). Written only by SetMarketPlacement.
	Pool      string
	Dedicated bool
}

// Order is an order's row.
type Order struct {
	ID             uuid.UUID
	MarketID       uuid.UUID
	Side           string
	Outcome        string
	Price          int
	Quantity       int64
	FilledQuantity int64
	Status         engine.Status
	CreatedAt      time.Time
	UpdatedAt      time.Time

	Seq       int64 // the engine's order id within the market
	AccountID int64

	TimeInForce   string     // GTC, IOC, FOK or GTD ("" is read as GTC)
	ExpiresAt     *time.Time // GTD only
	PostOnly      bool
	SelfTrade     string  // CANCEL_RESTING or CANCEL_INCOMING ("" is read as CANCEL_RESTING)
	ClientOrderID *string // the client's id for the order, unique per account
	// Placement fingerprints the placement's parameters (apiserver's orderRequest.placement) when
	// ClientOrderID is set.
	Placement    *string
	CancelReason *string // why a cancelled order was cancelled: USER, IOC, FOK, EXPIRED, ...
	// Priority, written by an amend that sent the order to the back of its level (0: unchanged),
	// is its new place in time (migration 011). Not read back: books are rebuilt in its order.
	Priority int64
	// OrderGroupID is the order group it belongs to, if any (migration 027): fixed at placement.
	OrderGroupID *uuid.UUID
	// Fees is the fee schedule it was placed under, which all its fills pay (migration 035).
	Fees engine.Fees
}

// PlacedOrder is an order just placed and the fills it made, in order.
type PlacedOrder struct {
	Order
	Trades []Trade
}

// Trade is an execution, seen from the taker's side.
type Trade struct {
	ID        uuid.UUID
	MarketID  uuid.UUID
	Outcome   string
	Side      string
	Price     int
	Quantity  int64
	YesPrice  int
	CreatedAt time.Time
	Fee       int64 // what the taker paid the exchange, in cents (engine.Leg.Fee)
}

// Position is an account's holding of one outcome of one market.
type Position struct {
	ID             uuid.UUID
	MarketID       uuid.UUID
	MarketQuestion string
	MarketStatus   domain.MarketStatus
	Outcome        string
	Quantity       int64
	LockedQuantity int64
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Account is a trading account and its play-money balance in cents.
type Account struct {
	UID       uuid.UUID
	Name      string
	Available int64
	Locked    int64
	CreatedAt time.Time

	ID int64 // the engine's account id
}

// Fill is one side of a trade, as the account on that side sees it.
type Fill struct {
	TradeID       uuid.UUID
	OrderID       uuid.UUID
	ClientOrderID *string
	MarketID      uuid.UUID
	Side, Outcome string
	Price         int // in the order's outcome's terms
	Quantity      int64
	Role          string // MAKER or TAKER
	CreatedAt     time.Time
	Fee           int64 // what this side paid the exchange, in cents: negative for a rebate
}

// Candle is one interval's trades of a market: the YES price's open, high, low and close, the
// shares traded and the number of trades.
type Candle struct {
	Start                  time.Time
	Open, High, Low, Close int
	Volume                 int64
	Trades                 int64
}

// AccountSettlement is what an account was paid when a market it held settled: per outcome held.
type AccountSettlement struct {
	MarketID     uuid.UUID
	MarketStatus domain.MarketStatus // RESOLVED or CANCELED
	Outcome      string
	Quantity     int64
	Payout       int64 // cents
	SettledAt    time.Time
}
