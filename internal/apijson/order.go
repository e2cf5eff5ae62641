// Package apijson holds the public API's JSON shapes (/api/v1, as openapi.yaml defines them), the
// one place the server side defines them: the API server writes them, the shards write orders,
// fills and settlements into accounts' feeds (package feed), so that a feed message carries an
// order exactly as GET /orders shows it, and the market and event pages (package marketpages)
// write markets, books, trades, candles and events. The store's rows carry more (sequence numbers,
// internal ids) and no JSON; these say exactly what a client sees. It imports no server package.
//
// The Go SDK (package client, github.com/pmx-dev/pmx/client) has shapes of its own, generated from
// openapi.yaml (client/api.gen.go), and the Python SDK (client/python) its models: the OpenAPI
// document is the contract both sides follow, and internal/apitest checks the server's answers
// against it.
package apijson

import (
	"cmp"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
)

// Order is an account's order.
type Order struct {
	ID             uuid.UUID  `json:"id"`
	MarketID       uuid.UUID  `json:"marketId"`
	Side           string     `json:"side"`
	Outcome        string     `json:"outcome"`
	Price          int        `json:"price"`
	Quantity       int64      `json:"quantity"`
	FilledQuantity int64      `json:"filledQuantity"`
	Status         string     `json:"status"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
	TimeInForce    string     `json:"timeInForce"`
	ExpiresAt      *time.Time `json:"expiresAt"`
	PostOnly       bool       `json:"postOnly"`
	ClientOrderID  *string    `json:"clientOrderId"`
	CancelReason   *string    `json:"cancelReason"`
	OrderGroupID   *uuid.UUID `json:"orderGroupId,omitempty"` // the order group it belongs to, if any
}

// OrderOf is the API's shape of an order's row.
func OrderOf(o *records.Order) Order {
	return Order{ID: o.ID, MarketID: o.MarketID, Side: o.Side, Outcome: o.Outcome, Price: o.Price, Quantity: o.Quantity,
		FilledQuantity: o.FilledQuantity, Status: o.Status.String(), CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt,
		TimeInForce: cmp.Or(o.TimeInForce, "GTC"), ExpiresAt: o.ExpiresAt, PostOnly: o.PostOnly, ClientOrderID: o.ClientOrderID,
		CancelReason: o.CancelReason, OrderGroupID: o.OrderGroupID}
}

// Fill is one of the account's fills, as maker or taker: the price in its own order's outcome's
// terms. Its id is the trade's id and the role together (a trade's two fills belong to two
// accounts, so the trade id alone is unique within an account's fills too).
type Fill struct {
	ID            uuid.UUID `json:"id"`
	TradeID       uuid.UUID `json:"tradeId"`
	OrderID       uuid.UUID `json:"orderId"`
	ClientOrderID *string   `json:"clientOrderId"`
	MarketID      uuid.UUID `json:"marketId"`
	Side          string    `json:"side"`
	Outcome       string    `json:"outcome"`
	Price         int       `json:"price"`
	Quantity      int64     `json:"quantity"`
	Role          string    `json:"role"`
	CreatedAt     time.Time `json:"createdAt"`
	// Fee is what this side paid the exchange for the fill, in cents: negative for a rebate, 0 in a
	// market without fees (docs/fees.md).
	Fee int64 `json:"fee"`
}

// FillOf is the API's shape of a fill's row.
func FillOf(f *records.Fill) Fill {
	return Fill{ID: FillID(f.TradeID, f.Role), TradeID: f.TradeID, OrderID: f.OrderID, ClientOrderID: f.ClientOrderID,
		MarketID: f.MarketID, Side: f.Side, Outcome: f.Outcome, Price: f.Price, Quantity: f.Quantity, Role: f.Role, CreatedAt: f.CreatedAt.UTC(), Fee: f.Fee}
}

// FillID is the id of a trade's fill in one role (MAKER or TAKER): a UUIDv5 of the two.
func FillID(trade uuid.UUID, role string) uuid.UUID { return uuid.NewSHA1(trade, []byte(role)) }

// Settlement is what an account was paid for one outcome it held when a market settled.
type Settlement struct {
	MarketID     uuid.UUID `json:"marketId"`
	MarketStatus string    `json:"marketStatus"`
	Outcome      string    `json:"outcome"`
	Quantity     int64     `json:"quantity"`
	Payout       int64     `json:"payout"`
	SettledAt    time.Time `json:"settledAt"`
}

// SettlementOf is the API's shape of a settlement's row.
func SettlementOf(a *records.AccountSettlement) Settlement {
	return Settlement{MarketID: a.MarketID, MarketStatus: string(a.MarketStatus), Outcome: a.Outcome, Quantity: a.Quantity,
		Payout: a.Payout, SettledAt: a.SettledAt}
}

// QueuePosition is where a resting order stands in its price level's queue (GET
// /order/queue-position), in the order's own terms: the unfilled shares of the orders ahead of it
// at its price, and of the whole level, its own included.
type QueuePosition struct {
	OrderID       uuid.UUID `json:"orderId"`
	MarketID      uuid.UUID `json:"marketId"`
	Side          string    `json:"side"`
	Outcome       string    `json:"outcome"`
	Price         int       `json:"price"`
	AheadQuantity int64     `json:"aheadQuantity"`
	LevelQuantity int64     `json:"levelQuantity"`
}
