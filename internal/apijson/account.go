package apijson

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
)

// Heartbeat is the state of the account's dead-man switch.
type Heartbeat struct {
	Armed    bool       `json:"armed"`
	Deadline *time.Time `json:"deadline"`
}

// PlacedOrder answers a placement: the order and the fills it made, in order.
type PlacedOrder struct {
	Order
	Trades []PlacedTrade `json:"trades"`
}

// PlacedTrade is a fill the placed (or amended) order made as the taker: the trade, and the fee
// the order paid for it (cents; 0 in a market without fees).
type PlacedTrade struct {
	Trade
	Fee int64 `json:"fee"`
}

// PlacedOf is the API's shape of a placement's answer.
func PlacedOf(p *records.PlacedOrder) PlacedOrder {
	return PlacedOrder{Order: OrderOf(&p.Order), Trades: ListOf(p.Trades, func(t *records.Trade) PlacedTrade {
		return PlacedTrade{Trade: TradeOf(t), Fee: t.Fee}
	})}
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

// PositionOf is the API's shape of a position's row.
func PositionOf(p *records.Position) Position {
	return Position{ID: p.ID, MarketID: p.MarketID, MarketQuestion: p.MarketQuestion, MarketStatus: string(p.MarketStatus),
		Outcome: p.Outcome, Quantity: p.Quantity, LockedQuantity: p.LockedQuantity, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

// Account is a trading account and its play-money balance in cents.
type Account struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	Available int64     `json:"available"`
	Locked    int64     `json:"locked"`
	CreatedAt time.Time `json:"createdAt"`
}

// AccountOf is the API's shape of an account's row.
func AccountOf(a *records.Account) Account {
	return Account{ID: a.UID, Name: a.Name, Available: a.Available, Locked: a.Locked, CreatedAt: a.CreatedAt}
}

// ListOf maps rows to their shapes: never nil, so that an empty list is [] and not null.
func ListOf[R, S any](rows []R, of func(*R) S) []S {
	out := make([]S, len(rows))
	for i := range rows {
		out[i] = of(&rows[i])
	}
	return out
}
