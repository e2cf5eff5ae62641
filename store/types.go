package store

import (
	"time"

	"github.com/google/uuid"
)

// Market statuses.
const (
	MarketOpen     = "OPEN"
	MarketClosed   = "CLOSED"
	MarketResolved = "RESOLVED"
	MarketCanceled = "CANCELED"
)

// Market is a YES/NO market, shaped as the public API shows it.
type Market struct {
	ID          uuid.UUID  `json:"id"`
	URL         *string    `json:"url"`
	Question    string     `json:"question"`
	Description *string    `json:"description"`
	Category    string     `json:"category"`
	Status      string     `json:"status"`
	ClosesAt    *time.Time `json:"closesAt"`
	ResolvesAt  *time.Time `json:"resolvesAt"`
	Resolved    bool       `json:"resolved"`
	Outcome     *string    `json:"outcome"` // the resolution, YES or NO; null until resolved
	LabelA      string     `json:"labelA"`
	LabelB      string     `json:"labelB"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`

	Name           *string `json:"-"` // the Market manifest's metadata.name, if it came from one
	LastTradePrice *int    `json:"-"` // YES price of the last trade
	Shard          *string `json:"-"` // the shard that owns the market, in distributed mode
	Epoch          int64   `json:"-"` // bumped at every change of owner
}

// Order is an order as the API shows it.
type Order struct {
	ID             uuid.UUID `json:"id"`
	MarketID       uuid.UUID `json:"marketId"`
	Side           string    `json:"side"`
	Outcome        string    `json:"outcome"`
	Price          int       `json:"price"`
	Quantity       int64     `json:"quantity"`
	FilledQuantity int64     `json:"filledQuantity"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`

	Seq       int64 `json:"-"` // the engine's order id within the market
	AccountID int64 `json:"-"`
}

// PlacedOrder is the answer to a placement: the order and the fills it made, in order.
type PlacedOrder struct {
	Order
	Trades []Trade `json:"trades"`
}

// Trade is an execution, seen from the taker's side.
type Trade struct {
	ID        uuid.UUID `json:"id"`
	MarketID  uuid.UUID `json:"marketId"`
	Outcome   string    `json:"outcome"`
	Side      string    `json:"side"`
	Price     int       `json:"price"`
	Quantity  int64     `json:"quantity"`
	YesPrice  int       `json:"yesPrice"`
	CreatedAt time.Time `json:"createdAt"`
}

// Position is an account's holding of one outcome of one market.
type Position struct {
	ID             uuid.UUID `json:"id"`
	MarketID       uuid.UUID `json:"marketId"`
	MarketQuestion string    `json:"marketQuestion"`
	MarketStatus   string    `json:"marketStatus"`
	Outcome        string    `json:"outcome"`
	Quantity       int64     `json:"quantity"`
	LockedQuantity int64     `json:"lockedQuantity"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

// Account is a trading account and its play-money balance in cents.
type Account struct {
	UID       uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	Available int64     `json:"available"`
	Locked    int64     `json:"locked"`
	CreatedAt time.Time `json:"createdAt"`

	ID int64 `json:"-"` // the engine's account id
}

// NewID returns a new row id for the hot tables (orders, trades, positions): a time-ordered UUID
// (version 7), so that each insert lands at the right-hand edge of the primary key's index rather
// than on a random page of it. Ids stay opaque to clients: any UUID is a valid id.
func NewID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}
