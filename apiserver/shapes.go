package apiserver

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/wire"
	"github.com/pmx-dev/pmx/internal/records"
)

// The public API's JSON shapes, as the API contract (openapi.yaml) defines them. The store's rows
// carry more (sequence numbers, internal ids) and no JSON; these say exactly what a client sees.
// They are exported for Go clients and tests that read the API.

// Order, Fill and Settlement are in package wire, which the shards' account feeds share; Market,
// Trade, Candle and the order book's shapes too, which the market pages share.
type (
	Order      = wire.Order
	Fill       = wire.Fill
	Settlement = wire.Settlement
	Market     = wire.Market
	Trade      = wire.Trade
	Candle     = wire.Candle
	BookView   = wire.BookView
	OrderBook  = wire.OrderBook
)

// Heartbeat is the state of the account's dead-man switch.
type Heartbeat struct {
	Armed    bool       `json:"armed"`
	Deadline *time.Time `json:"deadline"`
}

// PlacedOrder answers a placement: the order and the fills it made, in order.
type PlacedOrder struct {
	Order
	Trades []Trade `json:"trades"`
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
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	Available int64     `json:"available"`
	Locked    int64     `json:"locked"`
	CreatedAt time.Time `json:"createdAt"`
}

// MarketOf is the API's shape of a market's row.
func MarketOf(m *records.Market) Market { return wire.MarketOf(m) }

func orderOf(o *records.Order) Order { return wire.OrderOf(o) }

func placedOf(p *records.PlacedOrder) PlacedOrder {
	return PlacedOrder{Order: orderOf(&p.Order), Trades: listOf(p.Trades, tradeOf)}
}

func tradeOf(t *records.Trade) Trade { return wire.TradeOf(t) }

func positionOf(p *records.Position) Position {
	return Position{ID: p.ID, MarketID: p.MarketID, MarketQuestion: p.MarketQuestion, MarketStatus: string(p.MarketStatus),
		Outcome: p.Outcome, Quantity: p.Quantity, LockedQuantity: p.LockedQuantity, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

func accountOfRow(a *records.Account) Account {
	return Account{ID: a.UID, Name: a.Name, Available: a.Available, Locked: a.Locked, CreatedAt: a.CreatedAt}
}

// listOf maps rows to their shapes: never nil, so that an empty list is [] and not null.
func listOf[R, S any](rows []R, of func(*R) S) []S {
	out := make([]S, len(rows))
	for i := range rows {
		out[i] = of(&rows[i])
	}
	return out
}
